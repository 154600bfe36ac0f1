"""Problem statements written without a language model, from what the failing tests print.

- easy: the failing test's name, its output and the file the bug is in;
- medium: the failing output only;
- hard: two bugs at once, each described by its symptom (the error a failing test of it ends with).
"""

from __future__ import annotations

OUTPUT_CHARS = 1500
"""The most characters of a test's output a statement quotes (its end, where the error is)."""
ASK = ("Fix the project's code (not its tests) so that the failing tests pass and every other test keeps passing. "
       "Call submit when you are done.")


def easy(test: str, output: str, path: str) -> str:
    return (f"The test `{test}` fails:\n\n```\n{_tail(output)}\n```\n\nThe bug is in `{path}`.\n\n{ASK}")


def medium(output: str) -> str:
    return f"Running the project's tests shows this failure:\n\n```\n{_tail(output)}\n```\n\n{ASK}"


def hard(outputs: list[str]) -> str:
    symptoms = "\n".join(f"{number}. {symptom(output)}" for number, output in enumerate(outputs, 1))
    return (f"Two unrelated things are broken in this project. Each shows as a failure that ends like this:\n\n"
            f"{symptoms}\n\n{ASK}")


def symptom(output: str) -> str:
    """The error a test's output ends with: its ``E`` lines, or its last line where it has none."""
    errors = [line[1:].strip() for line in output.splitlines() if line.startswith("E ")]
    text = " ".join(errors) if errors else output.strip().splitlines()[-1] if output.strip() else "a failure"
    return f"`{_tail(text, 300)}`"


def _tail(text: str, limit: int = OUTPUT_CHARS) -> str:
    text = text.strip()
    return text if len(text) <= limit else "[...]\n" + text[-limit:]
