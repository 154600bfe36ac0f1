// Number fields with a minus and a plus button; the field also takes typing.
document.addEventListener("click", (event) => {
  const button = event.target.closest(".spinner button");
  if (!button) return;
  const input = button.parentElement.querySelector("input");
  const now = Number.parseInt(input.value, 10) || 0;
  const next = Math.max(Number(input.dataset.min), Math.min(Number(input.dataset.max), now + Number(button.dataset.step)));
  input.value = String(next);
});
