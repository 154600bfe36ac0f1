// A drop-down made of a button and a list box: a click opens it; choosing an option sets the value and closes it.
for (const dropdown of document.querySelectorAll(".dropdown")) {
  const button = dropdown.querySelector("[role=combobox]");
  const list = dropdown.querySelector("[role=listbox]");
  const open = (yes) => {
    list.hidden = !yes;
    button.setAttribute("aria-expanded", String(yes));
  };
  button.addEventListener("click", () => open(list.hidden));
  list.addEventListener("click", (event) => {
    const option = event.target.closest("[role=option]");
    if (!option) return;
    for (const other of list.children) other.setAttribute("aria-selected", String(other === option));
    dropdown.dataset.value = option.textContent;
    button.textContent = option.textContent;
    open(false);
  });
  document.addEventListener("click", (event) => { if (!dropdown.contains(event.target)) open(false); });
  document.addEventListener("keydown", (event) => { if (event.key === "Escape") open(false); });
}
