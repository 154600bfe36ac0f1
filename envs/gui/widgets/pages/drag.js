// Boxes moved with the pointer (pointer events, not HTML5 drag and drop); a box's value is the zone under its centre.
const board = document.querySelector(".board");
let held = null;
let offset = [0, 0];
const zoneOf = (box) => {
  const b = box.getBoundingClientRect();
  const [x, y] = [b.left + b.width / 2, b.top + b.height / 2];
  const zone = [...board.querySelectorAll(".zone")].find((z) => {
    const r = z.getBoundingClientRect();
    return x >= r.left && x <= r.right && y >= r.top && y <= r.bottom;
  });
  return zone ? zone.dataset.zone : "";
};
board.addEventListener("pointerdown", (event) => {
  const box = event.target.closest(".box");
  if (!box) return;
  held = box;
  held.setPointerCapture(event.pointerId);
  held.setAttribute("aria-grabbed", "true");
  offset = [event.clientX - box.offsetLeft, event.clientY - box.offsetTop];
});
board.addEventListener("pointermove", (event) => {
  if (!held) return;
  const x = Math.max(0, Math.min(board.clientWidth - held.offsetWidth, event.clientX - offset[0]));
  const y = Math.max(0, Math.min(board.clientHeight - held.offsetHeight, event.clientY - offset[1]));
  held.style.left = `${x}px`;
  held.style.top = `${y}px`;
});
board.addEventListener("pointerup", () => {
  if (!held) return;
  held.dataset.value = zoneOf(held);
  held.setAttribute("aria-grabbed", "false");
  held = null;
});
