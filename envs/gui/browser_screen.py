"""A :class:`~agentgym.envs.gui.env.Screen` over a Playwright page in the shared Chromium (tier 1).

The page has a fixed viewport and no network: every request it makes is aborted, so what it shows comes from
:meth:`BrowserScreen.show`. The mouse and keyboard act at viewport pixels; :meth:`BrowserScreen.elements`
lists what is visible, one line per element with its role, accessible name, state and centre. A closed page
or a dead browser is :class:`~agentgym.envs.web.browser.BrowserCrashed`; any other failure of an action is
the agent's mistake (a :class:`~agentgym.errors.ToolError`, e.g. a key Chromium does not know).
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, TypeVar

from agentgym.envs.gui.keys import playwright_combo
from agentgym.envs.web.browser import Browser, page_failure
from agentgym.envs.web.page_images import images_loaded

T = TypeVar("T")
DRAG_STEPS = 12
"""Pointer moves between the press and the release of a drag (HTML5 drag-and-drop needs several)."""

ELEMENTS_SCRIPT = r"""() => {
  const CONTROLS = new Set(["button", "link", "checkbox", "radio", "textbox", "searchbox", "combobox",
    "option", "tab", "menuitem", "menuitemcheckbox", "menuitemradio", "slider", "spinbutton", "switch",
    "listitem", "heading", "img", "treeitem", "gridcell"]);
  const CONTAINERS = new Set(["dialog", "alertdialog", "list", "listbox", "menu", "tablist", "tabpanel",
    "region", "group", "radiogroup", "form", "navigation", "toolbar"]);
  const INPUT_ROLES = {checkbox: "checkbox", radio: "radio", range: "slider", number: "spinbutton",
    button: "button", submit: "button", reset: "button", image: "button", search: "searchbox"};
  const SKIPPED = new Set(["SCRIPT", "STYLE", "NOSCRIPT", "TEMPLATE", "HEAD", "TITLE", "OPTION"]);
  const TEXT_INPUT = (el) => el.tagName === "TEXTAREA" ||
    (el.tagName === "INPUT" && !["checkbox", "radio", "button", "submit", "reset", "image", "range", "hidden"]
      .includes(el.type));
  const roleOf = (el) => {
    const explicit = el.getAttribute("role");
    if (explicit) return explicit.split(/\s+/)[0];
    const tag = el.tagName;
    if (tag === "BUTTON" || tag === "SUMMARY") return "button";
    if (tag === "A") return el.hasAttribute("href") ? "link" : null;
    if (tag === "INPUT") return el.type === "hidden" ? null : INPUT_ROLES[el.type] || "textbox";
    if (tag === "TEXTAREA") return "textbox";
    if (tag === "SELECT") return el.multiple || el.size > 1 ? "listbox" : "combobox";
    if (tag === "LI") return "listitem";
    if (tag === "UL" || tag === "OL") return "list";
    if (tag === "DIALOG") return "dialog";
    if (tag === "FORM") return "form";
    if (tag === "FIELDSET") return "group";
    if (/^H[1-6]$/.test(tag)) return "heading";
    if (tag === "IMG") return el.alt ? "img" : null;
    return null;
  };
  const clean = (text) => (text || "").replace(/\s+/g, " ").trim();
  const clip = (text, limit) => text.length > limit ? text.slice(0, limit - 1) + "\u2026" : text;
  const quote = (text) => text.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");
  const labelled = (el) => {
    const label = el.getAttribute("aria-label");
    if (label) return clean(label);
    const by = el.getAttribute("aria-labelledby");
    if (by) return clean(by.split(/\s+/).map((id) => document.getElementById(id)?.innerText ?? "").join(" "));
    return null;
  };
  const nameOf = (el, role) => {
    const label = labelled(el);
    if (label !== null) return label;
    if (CONTAINERS.has(role)) return null;
    if (el.labels && el.labels.length) return clean([...el.labels].map((l) => l.innerText).join(" "));
    if (el.tagName === "INPUT" && ["button", "submit", "reset"].includes(el.type)) return clean(el.value);
    if (TEXT_INPUT(el) || el.tagName === "SELECT") return clean(el.placeholder || el.title);
    if (el.tagName === "IMG") return clean(el.alt);
    return clean(el.innerText || el.title);
  };
  const valueOf = (el, role) => {
    if (TEXT_INPUT(el)) return el.type === "password" ? "\u2022".repeat(el.value.length) : el.value;
    if (el.tagName === "INPUT" && el.type === "range") return el.value;
    if (el.tagName === "SELECT") return el.selectedOptions[0]?.text ?? "";
    const aria = el.getAttribute("aria-valuetext") ?? el.getAttribute("aria-valuenow");
    if (aria !== null) return aria;
    if (role === "combobox") return clean(el.innerText);
    return null;
  };
  const statesOf = (el, role) => {
    const states = [];
    const aria = (name) => el.getAttribute(name);
    if (el.disabled || aria("aria-disabled") === "true") states.push("disabled");
    if (el.checked === true || aria("aria-checked") === "true") states.push("checked");
    if (aria("aria-selected") === "true") states.push("selected");
    if (aria("aria-pressed") === "true") states.push("pressed");
    const expanded = aria("aria-expanded");
    if (expanded !== null) states.push(expanded === "true" ? "expanded" : "collapsed");
    if (document.activeElement === el && el !== document.body) states.push("focused");
    if (aria("draggable") === "true" || aria("aria-grabbed") !== null) states.push("draggable");
    const style = getComputedStyle(el);
    const scrolls = (overflow) => overflow === "auto" || overflow === "scroll";
    if ((scrolls(style.overflowY) && el.scrollHeight > el.clientHeight + 1) ||
        (scrolls(style.overflowX) && el.scrollWidth > el.clientWidth + 1)) states.push("scrollable");
    const value = valueOf(el, role);
    if (value !== null) states.push(`value="${quote(clip(value, 100))}"`);
    return states;
  };
  const centreOf = (el) => {
    if (!el.checkVisibility({opacityProperty: true, visibilityProperty: true})) return null;
    const box = el.getBoundingClientRect();
    let [left, top, right, bottom] = [box.left, box.top, box.right, box.bottom];
    for (let up = el.parentElement; up && up !== document.documentElement; up = up.parentElement) {
      const style = getComputedStyle(up);
      if (style.overflowX === "visible" && style.overflowY === "visible") continue;
      const clip = up.getBoundingClientRect();
      [left, top, right, bottom] = [Math.max(left, clip.left), Math.max(top, clip.top),
        Math.min(right, clip.right), Math.min(bottom, clip.bottom)];
    }
    [left, top, right, bottom] = [Math.max(left, 0), Math.max(top, 0), Math.min(right, innerWidth),
      Math.min(bottom, innerHeight)];
    if (right - left < 1 || bottom - top < 1) return null;
    const [x, y] = [Math.floor((left + right) / 2), Math.floor((top + bottom) / 2)];
    const hit = document.elementFromPoint(x, y);
    const reached = hit && (el.contains(hit) || [...(el.labels || [])].some((l) => l.contains(hit)));
    return reached ? [x, y] : null;
  };
  const ownText = (el) => [...el.childNodes].some((n) => n.nodeType === Node.TEXT_NODE && n.data.trim());
  const lines = [];
  const texts = new Set();
  const insideListed = (el) => {
    for (let up = el.parentElement; up; up = up.parentElement) {
      if (texts.has(up) || CONTROLS.has(roleOf(up))) return true;
    }
    return false;
  };
  for (const el of document.body.querySelectorAll("*")) {
    if (SKIPPED.has(el.tagName) || el.closest("[aria-hidden=true]")) continue;
    let role = roleOf(el);
    let name;
    if (CONTROLS.has(role) || CONTAINERS.has(role)) {
      name = nameOf(el, role);
      if (name === null) continue;
    } else if (ownText(el) && !(el.tagName === "LABEL" && el.control) && !insideListed(el)) {
      role = "text";
      name = clean(el.innerText);
      texts.add(el);
    } else {
      continue;
    }
    const centre = centreOf(el);
    if (centre === null || (role === "text" && !name)) continue;
    const states = role === "text" ? [] : statesOf(el, role);
    const shown = states.length ? ` [${states.join(", ")}]` : "";
    lines.push(`- ${role} "${quote(clip(name, 120))}"${shown} (${centre[0]}, ${centre[1]})`);
  }
  return lines.join("\n");
}"""
"""Lists the visible elements, one line each: ``- role "name" [states] (x, y)``. Controls (buttons, links,
text boxes, check boxes, radios, options, tabs, sliders, list items, headings...) are always listed;
containers (dialogs, lists, tab panels, regions) only when they have an ``aria-label``; any other element with
text of its own is a ``text`` line; nothing inside ``aria-hidden="true"`` is. An element counts as visible
when its centre (of the part not clipped by scrolling containers or the viewport) hits it, so what lies under
a modal dialog is left out. States: ``disabled``, ``checked``, ``selected``, ``pressed``,
``expanded``/``collapsed``, ``focused``, ``draggable`` (``draggable="true"`` or an ``aria-grabbed``
attribute), ``scrollable``, and ``value="..."`` (a password is shown as dots)."""

SETTLE_SCRIPT = """async () => {
  const offsets = () => {
    let seen = `${scrollX},${scrollY}`;
    for (const el of document.querySelectorAll("*")) {
      if (el.scrollTop || el.scrollLeft) seen += `;${el.scrollTop},${el.scrollLeft}`;
    }
    return seen;
  };
  const frame = () => new Promise((resolve) => requestAnimationFrame(resolve));
  let last = offsets();
  for (let calm = 0, frames = 0; calm < 2 && frames < 60; frames++) {
    await frame();
    const now = offsets();
    calm = now === last ? calm + 1 : 0;
    last = now;
  }
}"""
"""Waits until no scroll offset on the page changed for two frames (a wheel scrolls asynchronously)."""


class BrowserScreen:
    """The screen of one Playwright ``page`` in ``browser``: its viewport is the display."""

    def __init__(self, browser: Browser, page: Any) -> None:
        self.browser = browser
        self.page = page
        size = page.viewport_size
        self.width: int = size["width"]
        self.height: int = size["height"]

    @classmethod
    async def open(cls, browser: Browser, width: int, height: int, *, site: str | None = None) -> BrowserScreen:
        """A fresh page of ``width`` x ``height`` in a context of its own that reaches no network but ``site``
        (a base URL such as ``http://127.0.0.1:8123``, for :meth:`goto`), if given."""
        page = await browser.open_page(viewport={"width": width, "height": height})
        screen = cls(browser, page)
        if site is None:
            await screen._run("open a page", page.context.route("**/*", _abort))
        else:
            await screen._run("open a page", page.context.route(lambda url: not url.startswith(site), _abort))
        return screen

    async def goto(self, url: str) -> None:
        """Load ``url`` (on the ``site`` the screen was opened with) and wait for it."""
        await self._run(f"open {url}", self.page.goto(url))

    async def show(self, html: str) -> None:
        """Make ``html`` the page's document (its scripts run; nothing is fetched)."""
        await self._run("show the page", self.page.set_content(html))

    async def evaluate(self, script: str) -> Any:
        """The value of a JavaScript function run in the page (how a validator reads the widgets' state)."""
        return await self._run("read the page", self.page.evaluate(script))

    async def close(self) -> None:
        """Close the page and its context; a page of a crashed browser is already gone."""
        await self.browser.close_page(self.page)

    async def click(self, x: int, y: int, *, button: str = "left", count: int = 1) -> None:
        """Click ``count`` times with ``button`` at (x, y) (``count=2``: a double-click)."""
        await self._run(f"click at ({x}, {y})", self.page.mouse.click(x, y, button=button, click_count=count))

    async def type(self, text: str) -> None:
        """Type ``text`` at the keyboard focus, a key event per character."""
        await self._run("type", self.page.keyboard.type(text))

    async def key(self, keys: tuple[str, ...]) -> None:
        """Press a combination of canonical key names; one Chromium does not know is a :class:`ToolError`."""
        combo = playwright_combo(keys)
        await self._run(f"press {combo}", self.page.keyboard.press(combo))

    async def drag(self, x1: int, y1: int, x2: int, y2: int) -> None:
        """Press at (x1, y1), move to (x2, y2) in :data:`DRAG_STEPS` steps, release."""
        await self._run(f"drag from ({x1}, {y1}) to ({x2}, {y2})", _drag(self.page.mouse, x1, y1, x2, y2))

    async def scroll(self, x: int, y: int, dx: int, dy: int) -> None:
        """Turn the wheel by (dx, dy) pixels with the pointer at (x, y), and wait until nothing scrolls."""
        await self._run(f"scroll at ({x}, {y})", _wheel(self.page, x, y, dx, dy))

    async def screenshot(self) -> bytes:
        """The viewport as a PNG once the page's images have loaded, without the text caret and with animations
        stopped."""
        await self._run("wait for the page's images", images_loaded(self.page))
        return await self._run(
            "take a screenshot", self.page.screenshot(type="png", caret="hide", animations="disabled")
        )

    async def elements(self) -> str:
        """The visible elements once the page's images have loaded, one per line (see :data:`ELEMENTS_SCRIPT`)."""
        await self._run("wait for the page's images", images_loaded(self.page))
        return await self._run("read the page", self.page.evaluate(ELEMENTS_SCRIPT))

    async def _run(self, what: str, action: Awaitable[T]) -> T:
        try:
            return await action
        except Exception as exc:
            raise page_failure(self.browser, self.page, what, exc) from exc


async def _abort(route: Any) -> None:
    await route.abort()


async def _drag(mouse: Any, x1: int, y1: int, x2: int, y2: int) -> None:
    await mouse.move(x1, y1)
    await mouse.down()
    await mouse.move(x2, y2, steps=DRAG_STEPS)
    await mouse.up()


async def _wheel(page: Any, x: int, y: int, dx: int, dy: int) -> None:
    await page.mouse.move(x, y)
    await page.mouse.wheel(dx, dy)
    await page.evaluate(SETTLE_SCRIPT)
