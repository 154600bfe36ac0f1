"""Tasks in the text editor (Mousepad): write and save a new file, replace words, add lines, copy a paragraph
from one file to another, sort lines, and look values up in one file to write them into another."""

from __future__ import annotations

import numpy as np

from agentgym.envs.gui.desktop.content import (
    FOLDERS,
    NOUN_SLOTS,
    NOUNS,
    STEMS,
    filler,
    names,
    sentence,
    words,
)
from agentgym.envs.gui.desktop.episode import (
    EDITOR,
    Episode,
    State,
    changed_lines,
    edit_score,
    key,
    line_match,
    lines,
    retype,
    save_as,
    typed,
)
from agentgym.seeding import pick

SETTINGS = {"timeout": ("15", "30", "45", "60", "90"), "retries": ("2", "3", "5", "8"),
            "port": ("8080", "8443", "9000", "9090"), "threads": ("2", "4", "6", "12"),
            "region": ("north", "south", "east", "west"), "theme": ("dark", "light", "solar", "ocean"),
            "language": ("english", "french", "german", "spanish"), "backup_hour": ("1", "2", "3", "4", "5")}
ITEMS = ("anchor", "basket", "button", "compass", "cushion", "helmet", "ladder", "magnet", "mirror", "needle",
         "pillow", "shovel", "stapler", "thermos", "trowel", "whistle")


def _block(text: str) -> str:
    """``text`` indented, to quote it in an instruction."""
    return "\n".join(f"    {line}" for line in text.rstrip("\n").split("\n"))


def _others(rng: np.random.Generator, taken: str, count: int = 3) -> dict[str, str]:
    """A few files around the task's own, none named ``taken``."""
    return {f"{stem}.txt": filler(rng) for stem in names(rng, STEMS, count + 1) if f"{stem}.txt" != taken}


def write_file(rng: np.random.Generator, difficulty: str) -> Episode:
    """Type the given lines (one, three or four) into a new document and save it under a given name; hard: in
    a subfolder, beside a file of a similar name."""
    stem, *rest = names(rng, STEMS, 4)
    folder = pick(rng, FOLDERS)
    files = {f"{other}.txt": filler(rng) for other in rest}
    files[f"{folder}/{stem}-old.txt"] = filler(rng)
    path = f"{folder}/{stem}.txt" if difficulty == "hard" else f"{stem}.txt"
    text = "\n".join(sentence(rng) for _ in range({"easy": 1, "medium": 3, "hard": 4}[difficulty])) + "\n"

    def check(state: State) -> list[float]:
        got = state.files.get(path)
        return [float(got is not None), line_match(got, text)]

    what = "this line" if difficulty == "easy" else "these lines"
    return Episode(
        instruction=(f"In the text editor, write {what} (without the indentation):\n{_block(text)}\n"
                     f"and save the document as /work/{path}."),
        files=files, apps=((EDITOR,),), check=check,
        plan=(*typed(text), *save_as(f"/work/{path}", new=True), ("done", {})),
    )


def replace_words(rng: np.random.Generator, difficulty: str) -> Episode:
    """Replace every occurrence of a word (hard: of two words) in a file of four or eight lines and save it."""
    count = 4 if difficulty == "easy" else 8
    pairs = 2 if difficulty == "hard" else 1
    chosen = names(rng, NOUNS, 2 * pairs)
    olds, news = chosen[:pairs], chosen[pairs:]
    rows = [words(rng, avoid=tuple(chosen)) for _ in range(count)]
    before, after = [list(row) for row in rows], [list(row) for row in rows]
    for index, (old, new) in enumerate(zip(olds, news, strict=True)):
        for row in rng.permutation(count)[: count // 2]:
            slot = NOUN_SLOTS[index] if pairs > 1 else pick(rng, NOUN_SLOTS)
            before[int(row)][slot], after[int(row)][slot] = old, new
    old_text, new_text = ("".join(" ".join(row) + ".\n" for row in text) for text in (before, after))
    path = f"{pick(rng, STEMS)}.txt"
    wanted = " and ".join(f'every "{old}" with "{new}"' for old, new in zip(olds, news, strict=True))
    targets = changed_lines(old_text, new_text)

    def check(state: State) -> list[float]:
        return [edit_score(state.files.get(path), new_text, targets)]

    return Episode(
        instruction=f"The text editor shows /work/{path}. Replace {wanted}, then save the file.",
        files={path: old_text, **_others(rng, path)}, apps=((EDITOR, f"/work/{path}"),), check=check,
        changes=frozenset({path}), plan=(*retype(new_text), ("done", {})),
    )


def add_lines(rng: np.random.Generator, difficulty: str) -> Episode:
    """Add a line (medium: two lines) at the end of a file and save it; hard: insert a line right after the
    line that mentions a given word."""
    marker = pick(rng, NOUNS)
    body = [f"- {sentence(rng, avoid=(marker,))}" for _ in range(5)]
    new = [f"- {sentence(rng, avoid=(marker,))}" for _ in range(2 if difficulty == "medium" else 1)]
    path = f"{pick(rng, STEMS)}.txt"
    old_text = "\n".join(body) + "\n"
    if difficulty == "hard":
        at = int(rng.integers(0, len(body) - 1))
        body[at] = f"- {' '.join(words(rng, avoid=(marker,))[:-1])} {marker}."
        old_text = "\n".join(body) + "\n"
        want = [*body[:at + 1], *new, *body[at + 1:]]
        task = f'insert this line right after the line that mentions "{marker}":\n{_block(new[0])}'
        plan = retype("\n".join(want) + "\n")
        targets = [at + 1]
    else:
        want = body + new
        what = "this line" if len(new) == 1 else "these two lines"
        task = f"add {what} at the end of the file:\n{_block(chr(10).join(new))}"
        plan = [key("ctrl+End"), *typed("\n".join(new) + "\n"), key("ctrl+s")]
        targets = list(range(len(body), len(want)))
    new_text = "\n".join(want) + "\n"

    def check(state: State) -> list[float]:
        return [edit_score(state.files.get(path), new_text, targets)]

    return Episode(
        instruction=f"The text editor shows /work/{path}. In it, {task}\nThen save the file.",
        files={path: old_text, **_others(rng, path)}, apps=((EDITOR, f"/work/{path}"),), check=check,
        changes=frozenset({path}), plan=(*plan, ("done", {})),
    )


def copy_paragraph(rng: np.random.Generator, difficulty: str) -> Episode:
    """Copy one paragraph of a file (named by its first words; hard: by a word in it) to the end of another,
    after an empty line, and save that one; the editor has both open, the target in front. The check counts
    the paragraph's lines in place (the empty line before them only places them)."""
    source, target = (f"{stem}.txt" for stem in names(rng, STEMS, 2))
    marker = pick(rng, NOUNS)
    size = (1, 1) if difficulty == "easy" else (2, 4)
    paragraphs: list[list[str]] = []
    while len(paragraphs) < 4:
        paragraph = [sentence(rng, avoid=(marker,)) for _ in range(int(rng.integers(*size, endpoint=True)))]
        if all(p[0].split()[:3] != paragraph[0].split()[:3] for p in paragraphs):
            paragraphs.append(paragraph)
    chosen = int(rng.integers(len(paragraphs)))
    if difficulty == "hard":
        paragraphs[chosen][-1] = " ".join(words(rng, avoid=(marker,))[:-1]) + f" {marker}."
        which = f'the paragraph that mentions "{marker}"'
    else:
        which = f'the paragraph that starts with "{" ".join(paragraphs[chosen][0].split()[:3])}"'
    target_text = "\n".join(sentence(rng) for _ in range(2)) + "\n"
    copied = "\n".join(paragraphs[chosen])
    new_text = f"{target_text}\n{copied}\n"
    targets = list(range(len(lines(target_text) or []) + 1, len(lines(new_text) or [])))

    def check(state: State) -> list[float]:
        return [edit_score(state.files.get(target), new_text, targets)]

    return Episode(
        instruction=(f"The text editor has /work/{source} and /work/{target} open. Copy {which} from {source} "
                     f"to the end of {target}, after an empty line, and save {target}."),
        files={source: "\n\n".join("\n".join(p) for p in paragraphs) + "\n", target: target_text},
        apps=((EDITOR, f"/work/{source}", f"/work/{target}"),), check=check, changes=frozenset({target}),
        plan=(key("ctrl+End"), *typed(f"\n{copied}\n"), key("ctrl+s"), ("done", {})),
    )


def sort_lines(rng: np.random.Generator, difficulty: str) -> Episode:
    """Sort the lines of a file: by name (easy), by the number after the colon (medium), or by name with the
    repeated lines removed (hard); save it."""
    path = f"{pick(rng, STEMS)}.txt"
    if difficulty == "medium":
        items = names(rng, ITEMS, 8)
        counts = [int(n) for n in rng.permutation(np.arange(1, 100))[:8]]
        entries = [f"{item}: {count}" for item, count in zip(items, counts, strict=True)]
        want = [entry for _, entry in sorted(zip(counts, entries, strict=True))]
        how = "by the number after the colon, smallest first"
    else:
        entries = names(rng, ITEMS, 6 if difficulty == "easy" else 8)
        want = sorted(entries)
        how = "alphabetically"
        if difficulty == "hard":
            entries = entries + names(rng, tuple(entries), 3)
            how = "alphabetically, keeping each line only once (remove the repeated lines)"
    order = rng.permutation(len(entries))
    while any(i < len(want) and entries[int(j)] == want[i] for i, j in enumerate(order)):
        order = rng.permutation(len(entries))
    old_text = "\n".join(entries[int(j)] for j in order) + "\n"
    new_text = "\n".join(want) + "\n"

    def check(state: State) -> list[float]:
        got = lines(state.files.get(path))
        if got is None:
            return [0.0]
        placed = sum(a == b for a, b in zip(got, want, strict=False)) / max(len(got), len(want))
        return [placed if sorted(got) == sorted(want) else placed / 2]

    return Episode(
        instruction=f"The text editor shows /work/{path}. Sort its lines {how}, then save the file.",
        files={path: old_text, **_others(rng, path)}, apps=((EDITOR, f"/work/{path}"),), check=check,
        changes=frozenset({path}), plan=(*retype(new_text), ("done", {})),
    )


def look_up(rng: np.random.Generator, difficulty: str) -> Episode:
    """Find a setting's value (easy) or an item's stock (medium), or its price and stock (hard), in one file and
    write it into answer.txt; the editor has both open, answer.txt in front."""
    if difficulty == "easy":
        source = "settings.ini"
        chosen = {name: pick(rng, values) for name, values in SETTINGS.items()}
        setting = pick(rng, sorted(chosen))
        text = "[app]\n" + "".join(f"{name} = {value}\n" for name, value in chosen.items())
        values = [chosen[setting]]
        question = f"Find the value of the setting {setting} in {source} and write only that value"
    else:
        source = "inventory.csv"
        items = names(rng, ITEMS, 10)
        rows = [(item, f"{int(rng.integers(100, 5000)) / 100:.2f}", str(int(rng.integers(0, 300))))
                for item in items]
        item, price, stock = pick(rng, rows)
        text = "item,price,stock\n" + "".join(f"{','.join(row)}\n" for row in rows)
        if difficulty == "medium":
            values = [stock]
            question = f"Find the stock of {item} in {source} and write only that number"
        else:
            values = [price, stock]
            question = (f"Find the price and the stock of {item} in {source} and write the price on the first "
                        "line and the stock on the second")

    def check(state: State) -> list[float]:
        got = lines(state.files.get("answer.txt")) or []
        got = [line.strip() for line in got] + [""] * len(values)
        return [float(got[i] == value) for i, value in enumerate(values)]

    return Episode(
        instruction=(f"The text editor has /work/{source} and /work/answer.txt open. {question} into "
                     "answer.txt, then save answer.txt."),
        files={source: text, "answer.txt": ""},
        apps=((EDITOR, f"/work/{source}", "/work/answer.txt"),), check=check,
        changes=frozenset({"answer.txt"}), plan=(*typed("\n".join(values)), key("ctrl+s"), ("done", {})),
    )
