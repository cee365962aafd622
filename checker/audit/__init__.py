"""The protocol-neutral half of ``kvproof audit``: :mod:`.common` reads a launch line and an
environment, checks a scenario family and prints the settings, the hazards and the verdict; :mod:`.flagtable`
turns an engine's own argument parser into a table of data and back into a parser; each
protocol's audit reads its own engine's flags through them."""
