// Tabs: choosing a tab shows its panel and hides the others.
for (const tablist of document.querySelectorAll("[role=tablist]")) {
  tablist.addEventListener("click", (event) => {
    const tab = event.target.closest("[role=tab]");
    if (!tab) return;
    for (const other of tablist.querySelectorAll("[role=tab]")) {
      other.setAttribute("aria-selected", String(other === tab));
      document.getElementById(other.getAttribute("aria-controls")).hidden = other !== tab;
    }
  });
}
