"""ld.so emulation that explains itself: every answer says how it was found, every failure what
was tried, in order (libtree's habit). Nothing is ever loaded."""
