"""Web environments: bundled sites served locally, played in a real Chromium through Playwright."""
