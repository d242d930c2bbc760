"""The Worker's task model (public names: ``soorma.TaskContext``, ``soorma.ResultContext``,
``soorma.DelegationSpec``)."""
