// Keyboard shortcuts: every combination with Ctrl, Alt or Meta is recorded, and the page says what it ran.
const MODIFIER_KEYS = ["Control", "Shift", "Alt", "Meta"];
document.addEventListener("keydown", (event) => {
  if (MODIFIER_KEYS.includes(event.key) || !(event.ctrlKey || event.altKey || event.metaKey)) return;
  event.preventDefault();
  const combo = [event.ctrlKey && "ctrl", event.altKey && "alt", event.shiftKey && "shift", event.metaKey && "super",
    event.key.toLowerCase()].filter(Boolean).join("+");
  agentgym.record("shortcut", combo);
  const command = document.querySelector(`[data-combo="${CSS.escape(combo)}"]`);
  document.querySelector(".status").textContent = command ? `Ran: ${command.dataset.command}` : `No command for ${combo}`;
});
