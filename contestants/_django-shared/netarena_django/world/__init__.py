"""TechEmpower's database scenarios in Django (docs/techempower.md): the World and Fortune tables as unmanaged
models read through Django's ORM, the fortunes page through Django's template engine."""
