package models

import play.api.libs.json.{Json, OWrites}

/** A row of TechEmpower's `world` table, written as {"id": ..., "randomNumber": ...}. */
case class World(id: Int, randomNumber: Int)

object World {
  implicit val writes: OWrites[World] = Json.writes[World]
}

/** A row of TechEmpower's `fortune` table. */
case class Fortune(id: Int, message: String)
