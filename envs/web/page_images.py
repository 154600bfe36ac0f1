"""Waiting for a page's images before it is read, so that one seed shows one page.

An image the page draws (an ``<img>``, or a CSS ``content``/``background-image`` URL such as MiniWoB's icons)
has no size until it has loaded, and the accessibility tree leaves out what has no size: read at once after a
script built the page, the same task showed its icons or not, by chance. :func:`images_loaded` waits until
every image the rendered page uses has loaded (or failed), then for the next frame to be laid out.
"""

from __future__ import annotations

from typing import Any

IMAGE_PATIENCE_MS = 3_000
"""How long to wait for the page's images before reading it anyway (a server that never answers)."""
IMAGES_SCRIPT = r"""(patience) => new Promise((resolve) => {
  const urls = new Set();
  const URL_PATTERN = /url\(\s*(['"]?)(.*?)\1\s*\)/g;
  const collect = (style) => {
    for (const value of [style.content, style.backgroundImage, style.listStyleImage, style.borderImageSource]) {
      if (value && value.includes("url(")) for (const match of value.matchAll(URL_PATTERN)) urls.add(match[2]);
    }
  };
  for (const el of document.querySelectorAll("*")) {
    collect(getComputedStyle(el));
    collect(getComputedStyle(el, "::before"));
    collect(getComputedStyle(el, "::after"));
  }
  const pending = [...urls].filter((url) => !url.startsWith("data:")).map((url) => {
    const image = new Image();
    image.src = url;
    return image;
  });
  pending.push(...[...document.images].filter((image) => image.loading !== "lazy"));
  const loads = pending.filter((image) => !image.complete).map((image) => image.decode().catch(() => null));
  if (loads.length === 0) return resolve(true);
  const frame = () => requestAnimationFrame(() => requestAnimationFrame(() => resolve(true)));
  Promise.all(loads).then(frame);
  setTimeout(() => resolve(false), patience);
})"""
"""Resolves to ``true`` once every image the page uses has loaded or failed and a frame has been laid out with
them (at once when none was still loading: a read of a settled page costs one style scan, not two frames); to
``false`` after ``patience`` ms. A lazy ``<img>`` is not waited for (it may never load)."""


async def images_loaded(page: Any, patience_ms: int = IMAGE_PATIENCE_MS) -> bool:
    """Wait until the images ``page`` uses have loaded (see :data:`IMAGES_SCRIPT`); whether they did in time."""
    return bool(await page.evaluate(IMAGES_SCRIPT, patience_ms))
