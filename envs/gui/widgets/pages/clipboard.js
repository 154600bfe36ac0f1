// The page's own clipboard: Chromium has one for the whole browser, which episodes running side by side share.
// Ctrl+C keeps the selected text here (the selection in the focused field, else on the page); Ctrl+V inserts it.
let copied = "";
const selectedText = () => {
  const field = document.activeElement;
  if (field && typeof field.selectionStart === "number" && field.selectionStart !== field.selectionEnd) {
    return field.value.slice(field.selectionStart, field.selectionEnd);
  }
  return getSelection().toString();
};
document.addEventListener("copy", (event) => {
  event.preventDefault();
  copied = selectedText();
});
document.addEventListener("paste", (event) => {
  event.preventDefault();
  agentgym.record("paste", copied);
  document.execCommand("insertText", false, copied);
});
