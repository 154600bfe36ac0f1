"""GUI tier 2: an X desktop (Xvfb, the JWM window manager, a text editor, a file manager and a terminal) in a
docker sandbox, driven with xdotool at pixel coordinates; tasks are checked by reading the files afterwards and
the windows the applications show."""
