// A date picker: clicking the field opens a month calendar with month navigation; a day fills the field (ISO date).
const MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
  "November", "December"];
const WEEKDAYS = ["Mo", "Tu", "We", "Th", "Fr", "Sa", "Su"];
const field = document.querySelector(".datepicker input");
const calendar = document.querySelector(".calendar");
const grid = calendar.querySelector(".cal-grid");
let year = Number(calendar.dataset.year);
let month = Number(calendar.dataset.month) - 1;
const pad = (n) => String(n).padStart(2, "0");
const cell = (tag, text, attributes = {}) => {
  const el = document.createElement(tag);
  el.textContent = text;
  for (const [name, value] of Object.entries(attributes)) el.setAttribute(name, value);
  return el;
};
const draw = () => {
  calendar.querySelector("h3").textContent = `${MONTHS[month]} ${year}`;
  const blanks = (new Date(Date.UTC(year, month, 1)).getUTCDay() + 6) % 7;
  const days = new Date(Date.UTC(year, month + 1, 0)).getUTCDate();
  grid.replaceChildren(
    ...WEEKDAYS.map((d) => cell("span", d, {class: "weekday", "aria-hidden": "true"})),
    ...Array.from({length: blanks}, () => cell("span", "")),
    ...Array.from({length: days}, (_, i) => cell("button", String(i + 1),
      {"data-day": String(i + 1), "aria-label": `${MONTHS[month]} ${i + 1}, ${year}`})));
};
const turn = (by) => {
  month += by;
  year += Math.floor(month / 12);
  month = ((month % 12) + 12) % 12;
  draw();
};
field.addEventListener("click", () => { calendar.hidden = !calendar.hidden; });
calendar.querySelector("[data-turn='-1']").addEventListener("click", () => turn(-1));
calendar.querySelector("[data-turn='1']").addEventListener("click", () => turn(1));
grid.addEventListener("click", (event) => {
  const day = event.target.closest("button[data-day]");
  if (!day) return;
  field.value = `${year}-${pad(month + 1)}-${pad(day.dataset.day)}`;
  calendar.hidden = true;
});
document.addEventListener("keydown", (event) => { if (event.key === "Escape") calendar.hidden = true; });
draw();
