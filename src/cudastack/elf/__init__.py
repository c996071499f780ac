"""Reading ELF objects: dynamic section, dynamic symbols, symbol versions. Only the bytes needed."""

from cudastack.elf.reader import ElfFile, ElfParseError, Import, read_elf

__all__ = ["ElfFile", "ElfParseError", "Import", "read_elf"]
