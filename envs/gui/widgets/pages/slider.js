// Sliders driven by the pointer (press or drag on the track) or the keyboard (arrows, Page Up/Down, Home, End).
for (const slider of document.querySelectorAll(".slider")) {
  const [min, max, step] = ["aria-valuemin", "aria-valuemax", "data-step"].map((a) => Number(slider.getAttribute(a)));
  const set = (value) => {
    const snapped = Math.max(min, Math.min(max, Math.round((value - min) / step) * step + min));
    const share = `${((snapped - min) / (max - min)) * 100}%`;
    slider.setAttribute("aria-valuenow", String(snapped));
    slider.dataset.value = String(snapped);
    slider.querySelector(".fill").style.width = share;
    slider.querySelector(".thumb").style.left = share;
    slider.parentElement.querySelector("output").textContent = String(snapped);
  };
  const follow = (event) => {
    const box = slider.getBoundingClientRect();
    set(min + ((event.clientX - box.left) / box.width) * (max - min));
  };
  slider.addEventListener("pointerdown", (event) => {
    slider.setPointerCapture(event.pointerId);
    follow(event);
  });
  slider.addEventListener("pointermove", (event) => { if (slider.hasPointerCapture(event.pointerId)) follow(event); });
  slider.addEventListener("keydown", (event) => {
    const now = Number(slider.dataset.value);
    const moves = {ArrowRight: now + step, ArrowUp: now + step, ArrowLeft: now - step, ArrowDown: now - step,
      PageUp: now + 10 * step, PageDown: now - 10 * step, Home: min, End: max};
    if (event.key in moves) {
      event.preventDefault();
      set(moves[event.key]);
    }
  });
  set(Number(slider.dataset.value));
}
