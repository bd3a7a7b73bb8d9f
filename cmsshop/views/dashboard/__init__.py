"""The customer dashboard at the edge: orders, invoices, downloads (signed URLs, the
cookie-less download route) and licenses, as JSON and as the /account pages."""
