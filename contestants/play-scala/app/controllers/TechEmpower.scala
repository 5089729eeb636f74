package controllers

import java.sql.Connection
import java.util.concurrent.ThreadLocalRandom
import javax.inject.{Inject, Singleton}

import scala.collection.immutable.SortedMap
import scala.concurrent.{ExecutionContext, Future}
import scala.util.Using

import models.{Fortune, World}
import org.apache.pekko.actor.ActorSystem
import play.api.db.{DBApi, Database}
import play.api.libs.concurrent.CustomExecutionContext
import play.api.libs.json.{JsValue, Json}
import play.api.mvc._

/** Play's "database dispatcher": the thread pool configured as database.dispatcher, where JDBC may block. */
@Singleton
class DatabaseExecutionContext @Inject() (system: ActorSystem) extends CustomExecutionContext(system, "database.dispatcher")

/**
 * TechEmpower's database scenarios (/db, /queries, /fortunes, /updates, /cached-queries) on PostgreSQL through
 * Play's JDBC module: its HikariCP pool of pgjdbc connections, plain JDBC statements inside db.withConnection.
 * Every query runs on the database dispatcher; the answer is built back on Play's default dispatcher.
 */
@Singleton
class TechEmpower @Inject() (cc: ControllerComponents, dbApi: DBApi, databaseContext: DatabaseExecutionContext)(
    implicit ec: ExecutionContext
) extends AbstractController(cc) {
  import TechEmpower._

  /** None when the harness gave no database URL (a scenario without one): the routes answer 404. */
  private val database: Option[Database] = dbApi.databases().find(_.name == "default")

  /** /cached-queries answers from this copy of world (index = id), read before the server listens. */
  private val cache: Array[Int] = database.map(readWorldCopy).getOrElse(Array.emptyIntArray)

  def db(): Action[AnyContent] = onDatabase(conn => Json.toJson(readWorlds(conn, 1).head))

  def queries(queries: Option[String]): Action[AnyContent] = {
    val n = count(queries)
    onDatabase(conn => Json.toJson(readWorlds(conn, n)))
  }

  def updates(queries: Option[String]): Action[AnyContent] = {
    val n = count(queries)
    onDatabase { conn =>
      val read = readWorlds(conn, n)
      // An id drawn twice keeps its last number, in the answer too. Sorted by id so that concurrent
      // requests lock the rows in the same order and cannot deadlock.
      val last = SortedMap.from(read.map(world => world.id -> randomId()))
      // As pairs, in id order: keys and values mapped apart would each be rebuilt as a set, losing the pairing.
      val (ids, numbers) = last.toVector.unzip
      Using.resource(conn.prepareStatement(WorldUpdate)) { update =>
        update.setArray(1, conn.createArrayOf("int4", ids.map(Int.box).toArray[AnyRef]))
        update.setArray(2, conn.createArrayOf("int4", numbers.map(Int.box).toArray[AnyRef]))
        update.executeUpdate()
      }
      Json.toJson(read.map(world => World(world.id, last(world.id))))
    }
  }

  def cachedQueries(count: Option[String]): Action[AnyContent] = Action {
    if (database.isEmpty) notConfigured
    else {
      val worlds = Seq.fill(TechEmpower.count(count)) { val id = randomId(); World(id, cache(id)) }
      Ok(Json.toJson(worlds)).withHeaders(ServerHeader)
    }
  }

  def fortunes(): Action[AnyContent] = Action.async {
    database match {
      case None => Future.successful(notConfigured)
      case Some(db) =>
        Future(db.withConnection(readFortunes(_)))(databaseContext).map { rows =>
          val sorted = (Fortune(0, "Additional fortune added at request time.") +: rows).sortBy(_.message)
          Ok(views.html.fortunes(sorted)).withHeaders(ServerHeader)
        }
    }
  }

  /** The query and its rows' JSON tree on the database dispatcher with a pooled connection; the answer is
   * written on Play's default dispatcher. */
  private def onDatabase(query: Connection => JsValue): Action[AnyContent] = Action.async {
    database match {
      case None     => Future.successful(notConfigured)
      case Some(db) => Future(db.withConnection(query))(databaseContext).map(Ok(_).withHeaders(ServerHeader))
    }
  }

  private def notConfigured: Result = NotFound("postgresql is not configured: set NETARENA_POSTGRESQL_URL\n")
}

object TechEmpower {
  val WorldRows = 10000
  val MaxQueries = 500
  // TechEmpower requires a Server header on these answers; Play's Pekko HTTP backend sends Date but no Server.
  val ServerHeader: (String, String) = "Server" -> "play-scala"
  // One batched UPDATE (allowed by TechEmpower's rules): the ids and their new numbers as two arrays.
  val WorldUpdate = "UPDATE world SET randomnumber = v.n FROM unnest(?::int[], ?::int[]) AS v(id, n) WHERE world.id = v.id"

  /** TechEmpower's clamp of queries/count: missing or not a number is 1, then 1..500. */
  def count(value: Option[String]): Int = value.flatMap(_.toIntOption).fold(1)(n => math.max(1, math.min(n, MaxQueries)))

  def randomId(): Int = ThreadLocalRandom.current().nextInt(WorldRows) + 1

  /** n random rows, each read by its own query (TechEmpower forbids one IN (...) query), one after the other. */
  def readWorlds(conn: Connection, n: Int): Vector[World] =
    Using.resource(conn.prepareStatement("SELECT id, randomnumber FROM world WHERE id = ?")) { select =>
      Vector.fill(n) {
        select.setInt(1, randomId())
        Using.resource(select.executeQuery()) { row =>
          if (!row.next()) throw new IllegalStateException(s"world has no row for a random id in 1..$WorldRows")
          World(row.getInt(1), row.getInt(2))
        }
      }
    }

  def readFortunes(conn: Connection): Vector[Fortune] =
    Using.resource(conn.createStatement()) { statement =>
      Using.resource(statement.executeQuery("SELECT id, message FROM fortune")) { row =>
        Iterator.continually(row).takeWhile(_.next()).map(r => Fortune(r.getInt(1), r.getString(2))).toVector
      }
    }

  /** world's rows by id. netarena starts the server once the database holds its fixture. */
  def readWorldCopy(db: Database): Array[Int] = db.withConnection { conn =>
    val cache = new Array[Int](WorldRows + 1)
    Using.resource(conn.createStatement()) { statement =>
      Using.resource(statement.executeQuery("SELECT id, randomnumber FROM world")) { row =>
        while (row.next()) {
          val id = row.getInt(1)
          if (id < 1 || id > WorldRows) throw new IllegalStateException(s"world has id $id outside 1..$WorldRows")
          cache(id) = row.getInt(2)
        }
      }
    }
    cache
  }
}
