// Shared by every widget page: the event log the validator reads, and the behaviours many tasks use.
window.agentgym = {
  log: [],
  record(kind, detail) { this.log.push([kind, String(detail)]); },
};
document.addEventListener("click", (event) => {
  const logged = event.target.closest("[data-log]");
  if (logged) agentgym.record("click", logged.dataset.log);
  const selectable = event.target.closest("[data-selectable]");
  if (selectable) {
    for (const other of selectable.parentElement.children) other.setAttribute("aria-selected", "false");
    selectable.setAttribute("aria-selected", "true");
  }
  if (event.target.closest("a[href]")) event.preventDefault();
});
document.addEventListener("submit", (event) => event.preventDefault());
