package netarena

import java.net.{URI, URISyntaxException}

import play.api.{ApplicationLoader, Configuration}
import play.api.inject.guice.{GuiceApplicationBuilder, GuiceApplicationLoader}

/**
 * Play's Guice loader with one addition: the database `default` (db.default.*, read by Play's JDBC module)
 * from netarena.postgresql-url, netarena's libpq URL. Play's own `postgres://` form needs a password, which
 * netarena's URL has none of, and HOCON cannot leave `db.default` out when the URL is empty: without a URL
 * there is no `db.default`, so Play's JDBC module makes no pool and connects to nothing.
 */
class PostgresqlLoader extends GuiceApplicationLoader {
  override def builder(context: ApplicationLoader.Context): GuiceApplicationBuilder = {
    val config = context.initialConfiguration
    initialBuilder
      .in(context.environment)
      .loadConfig(PostgresqlLoader.defaultDatabase(config).withFallback(config))
      .overrides(overrides(context): _*)
  }
}

object PostgresqlLoader {

  /** db.default's settings for netarena.postgresql-url, none when it is unset or empty. */
  def defaultDatabase(config: Configuration): Configuration =
    config.getOptional[String]("netarena.postgresql-url").filter(_.nonEmpty) match {
      case None => Configuration.empty
      case Some(url) =>
        val pool = config.get[Int]("netarena.db-pool")
        if (pool < 1) throw new IllegalArgumentException(s"netarena.db-pool must be at least 1, got $pool")
        val (jdbcUrl, user, password) = jdbcSettings(url)
        Configuration.from(
          Map(
            "db.default.driver" -> "org.postgresql.Driver",
            "db.default.url" -> jdbcUrl,
            "db.default.hikaricp.maximumPoolSize" -> pool,
            "db.default.hikaricp.poolName" -> "netarena-postgresql"
          ) ++ user.map("db.default.username" -> _) ++ password.map("db.default.password" -> _)
        )
    }

  /** postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE as a JDBC URL, user and password. */
  def jdbcSettings(url: String): (String, Option[String], Option[String]) = {
    def bad(why: String) =
      new IllegalArgumentException(s"NETARENA_POSTGRESQL_URL '$url' is not postgres://USER@HOST:PORT/DATABASE: $why")
    val uri =
      try new URI(url)
      catch { case e: URISyntaxException => throw bad(e.getMessage) }
    if (!Set("postgres", "postgresql").contains(uri.getScheme)) throw bad("its scheme is not postgres")
    if (uri.getHost == null) throw bad("it names no host")
    if (uri.getPath == null || uri.getPath.length < 2) throw bad("it names no database")
    val port = if (uri.getPort < 0) 5432 else uri.getPort
    val userInfo = Option(uri.getUserInfo).map(_.split(":", 2))
    (s"jdbc:postgresql://${uri.getHost}:$port${uri.getPath}", userInfo.map(_(0)), userInfo.flatMap(_.lift(1)))
  }
}
