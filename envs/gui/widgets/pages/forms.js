// Forms record what they send: on submit, or on Enter in a form marked data-enter-submits (it has no button).
const send = (form) => agentgym.record("submit", JSON.stringify(Object.fromEntries([...form.elements]
  .filter((el) => el.name).map((el) => [el.name, el.type === "checkbox" ? el.checked : el.value]))));
document.addEventListener("submit", (event) => send(event.target));
document.addEventListener("keydown", (event) => {
  const form = event.target.closest && event.target.closest("form[data-enter-submits]");
  if (form && event.key === "Enter") {
    event.preventDefault();
    send(form);
  }
});
document.querySelector("[autofocus]")?.focus();
