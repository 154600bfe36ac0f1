// A list reordered by HTML5 drag and drop: an item dropped on the upper half of another goes before it, else after.
const list = document.querySelector(".reorder");
let dragged = null;
list.addEventListener("dragstart", (event) => {
  dragged = event.target.closest("li");
  event.dataTransfer.setData("text/plain", dragged.dataset.item);
  event.dataTransfer.effectAllowed = "move";
});
list.addEventListener("dragover", (event) => event.preventDefault());
list.addEventListener("drop", (event) => {
  event.preventDefault();
  const onto = event.target.closest("li");
  if (dragged && onto && onto !== dragged) {
    const box = onto.getBoundingClientRect();
    if (event.clientY < box.top + box.height / 2) onto.before(dragged);
    else onto.after(dragged);
    list.dataset.value = JSON.stringify([...list.children].map((li) => li.dataset.item));
  }
  dragged = null;
});
