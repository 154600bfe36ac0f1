// A modal dialog: any of its buttons closes it.
const overlay = document.querySelector(".overlay");
overlay.addEventListener("click", (event) => {
  if (event.target.closest(".modal button")) overlay.hidden = true;
});
