"""HTTP edge of taxes and invoices: seller identity (seller_*), billing details (billing_*)."""
