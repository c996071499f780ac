"""``cudastack plan``: predict, before anything is installed, what an install would break.

resolve (the installer's dry run) → fetch (``pip download`` into a sha256-addressed cache) →
extract (only what the doctor reads) → overlay (today's site-packages minus the replaced
distributions, plus the planned ones) → the doctor on the overlay → findings added and removed
against today. Nothing here changes the inspected environment, and nothing here prints.
"""
