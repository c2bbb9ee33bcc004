"""A store's upkeep: what goes in (``publish``, its checks and preparation, staging and the fan-in, intake
from URLs), what is kept (``gc``), what is made again from the tree (``reindex``, adoption, re-reading), what
is checked (``verify``), what it lists (``ls``), and what it remembers of failed builds. Imports: ``ops``
core modules only; never another ``ops`` package.
"""
