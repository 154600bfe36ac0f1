"""Sites bundled with the web environments, each a small ASGI app with state its validators read."""

OracleStep = tuple[str, str, str, str]
"""One action of a site task's oracle: (tool, role, accessible name, value). ``click`` names its element by
role and name; ``fill`` and ``select_option`` add the value; ``send_msg_to_user`` has only the value, its
message."""
