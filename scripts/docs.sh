#!/usr/bin/env bash
# Build the documentation site (mkdocs.yml, docs/) into site/ with `mkdocs build --strict`: a broken link, a page
# left out of the nav or a docstring the API reference cannot render fails the build. Installs the docs extra
# into .venv first where MkDocs Material or mkdocstrings is missing (scripts/setup.sh creates .venv if needed).
# Extra arguments go to `mkdocs build`.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! .venv/bin/python -c "import material, mkdocstrings, mkdocstrings_handlers.python" 2>/dev/null; then
  bash scripts/setup.sh docs >/dev/null
fi
NO_MKDOCS_2_WARNING=1 exec .venv/bin/mkdocs build --strict "$@"
