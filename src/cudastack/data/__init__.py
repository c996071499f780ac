"""Knowledge as data: every table carries the source it was taken from."""
