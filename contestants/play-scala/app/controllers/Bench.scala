package controllers

import java.nio.file.{Files, LinkOption, Path, Paths}
import java.util.concurrent.ConcurrentHashMap
import javax.inject.{Inject, Singleton}

import scala.concurrent.{ExecutionContext, Future}
import scala.concurrent.duration._

import com.mongodb.client.model.Filters
import com.mongodb.reactivestreams.client.{MongoClients, MongoCollection}
import org.apache.pekko.stream.Materializer
import org.apache.pekko.stream.scaladsl.{Sink, Source}
import org.apache.pekko.util.ByteString
import org.bson.Document
import play.api.Configuration
import play.api.inject.ApplicationLifecycle
import play.api.libs.concurrent.Futures
import play.api.libs.json.Json
import play.api.mvc._

@Singleton
class Bench @Inject() (
    cc: ControllerComponents,
    futures: Futures,
    config: Configuration,
    lifecycle: ApplicationLifecycle
)(implicit ec: ExecutionContext, mat: Materializer)
    extends AbstractController(cc) {

  private val MaxBytes = 16 * 1024 * 1024
  private val MaxSleepMs = 60000

  private val staticRoot: Path = config.getOptional[String]("netarena.static-dir") match {
    case Some(dir) if Files.isDirectory(Paths.get(dir)) => Paths.get(dir).toAbsolutePath.normalize
    case other =>
      throw new IllegalArgumentException(
        s"static dir ${other.getOrElse("(unset)")} is not a directory; set NETARENA_STATIC_DIR to the static file set")
  }

  // /bytes/{n} bodies are built once per n and shared between requests.
  private val bodies = new ConcurrentHashMap[Int, ByteString]()
  private def body(n: Int): ByteString = bodies.computeIfAbsent(n, k => ByteString(Array.fill[Byte](k)('*'.toByte)))
  Seq(40, 10000, 524288).foreach(body)

  // One MongoClient (its connection pool at the driver's default of 100) for the JVM, closed on shutdown.
  private val docs: Option[MongoCollection[Document]] =
    config.getOptional[String]("netarena.mongo-url").filter(_.nonEmpty).map { url =>
      val client = MongoClients.create(url)
      lifecycle.addStopHook(() => Future.successful(client.close()))
      // The URL names the database, as for the other contestants.
      val database = Option(new com.mongodb.ConnectionString(url).getDatabase).getOrElse("test")
      client.getDatabase(database).getCollection("docs")
    }

  // One find by _id per request; the driver's Publisher is read through Pekko Streams and the document
  // rendered with the driver's own JSON writer (relaxed extended JSON: plain numbers, strings, booleans).
  def mongo(name: String): Action[AnyContent] = Action.async {
    docs match {
      case None => Future.successful(NotFound("mongo is not configured: set NETARENA_MONGO_URL\n"))
      case Some(collection) =>
        Source.fromPublisher(collection.find(Filters.eq("_id", name)).first()).runWith(Sink.headOption).map {
          case Some(doc) => Ok(doc.toJson).as(JSON)
          case None      => NotFound("not found\n")
        }
    }
  }

  def hello(): Action[AnyContent] = Action(Ok("Hello, World!"))

  def json(): Action[AnyContent] = Action(Ok(Json.obj("message" -> "Hello, World!")))

  def bytes(n: Int): Action[AnyContent] = Action {
    if (n < 0 || n > MaxBytes) BadRequest(s"/bytes/{n} needs 0 <= n <= $MaxBytes\n")
    else Ok(body(n)).as("application/octet-stream")
  }

  // Play's non-blocking delay: a scheduler timer completes the future, no thread waits.
  def sleep(ms: Int): Action[AnyContent] = Action.async {
    if (ms < 0 || ms > MaxSleepMs) Future.successful(BadRequest(s"/sleep/{ms} needs 0 <= ms <= $MaxSleepMs\n"))
    else futures.delayed(ms.millis)(Future.successful(Ok(s"slept $ms")))
  }

  // Play's Assets controllers serve the application's own packaged assets, and ExternalAssets
  // is disabled in production mode, so files from a runtime folder go through Ok.sendPath.
  def staticFile(file: String): Action[AnyContent] = Action {
    val path = staticRoot.resolve(file).normalize
    if (!path.startsWith(staticRoot)) Forbidden("path escapes the static folder\n")
    else if (!Files.isRegularFile(path, LinkOption.NOFOLLOW_LINKS)) NotFound("not found\n")
    else Ok.sendPath(path, inline = true)
  }
}
