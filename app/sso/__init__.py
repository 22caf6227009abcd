"""Single sign-on with OpenID Connect, per tenant (docs/adr/0081)."""
