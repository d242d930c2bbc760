"""Shared DTOs and error types for the Soorma platform.

Pure data: no I/O, no web framework, no SQL. Each name has one home, its module:
``soorma_common.events.EventEnvelope``, ``soorma_common.errors.VersionConflict``, ... The
package itself re-exports nothing, so importing it loads no model an application does not
use (the A2A models are the largest).
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
