// Files: a double-click opens one; a right-click opens the menu of commands for it (where the page has one).
const status = document.querySelector(".status");
const menu = document.querySelector("[role=menu]");
let menuFile = null;
const closeMenu = () => { if (menu) menu.hidden = true; };
document.addEventListener("dblclick", (event) => {
  const file = event.target.closest("[data-file]");
  if (!file) return;
  agentgym.record("open", file.dataset.file);
  status.textContent = `Opened ${file.dataset.file}`;
});
document.addEventListener("contextmenu", (event) => {
  event.preventDefault();
  const file = event.target.closest("[data-file]");
  if (!menu || !file) return closeMenu();
  menuFile = file.dataset.file;
  menu.setAttribute("aria-label", `Commands for ${menuFile}`);
  menu.hidden = false;
  const area = document.getElementById("area").getBoundingClientRect();
  const x = Math.min(event.clientX, innerWidth - menu.offsetWidth - 4);
  const y = Math.min(event.clientY, innerHeight - menu.offsetHeight - 4);
  menu.style.left = `${x - area.left}px`;
  menu.style.top = `${y - area.top}px`;
});
document.addEventListener("click", (event) => {
  const item = event.target.closest("[role=menuitem]");
  if (item) {
    agentgym.record("command", `${menuFile}: ${item.textContent}`);
    status.textContent = `${item.textContent}: ${menuFile}`;
  }
  closeMenu();
});
document.addEventListener("keydown", (event) => { if (event.key === "Escape") closeMenu(); });
