"""The Worker's task model; import it from :mod:`soorma.task`."""
