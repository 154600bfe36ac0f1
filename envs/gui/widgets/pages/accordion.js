// An accordion: each section's header button shows or hides the section.
for (const header of document.querySelectorAll(".accordion .head")) {
  header.addEventListener("click", () => {
    const open = header.getAttribute("aria-expanded") !== "true";
    header.setAttribute("aria-expanded", String(open));
    document.getElementById(header.getAttribute("aria-controls")).hidden = !open;
  });
}
