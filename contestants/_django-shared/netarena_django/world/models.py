"""The tables netarena's PostgreSQL fixture creates (hello_world: world, fortune); Django never migrates them."""
from django.db import models


class World(models.Model):
    randomnumber = models.IntegerField()

    class Meta:
        db_table = "world"
        managed = False


class Fortune(models.Model):
    message = models.TextField()

    class Meta:
        db_table = "fortune"
        managed = False
