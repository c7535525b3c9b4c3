"""Files, the bottom layer: atomic writes (:mod:`.atomic`), JSON-ready values (:mod:`.jsonable`), pickle-free
state files (:mod:`.checkpoint`). Imports nothing of powerdp but :mod:`powerdp.errors`."""
