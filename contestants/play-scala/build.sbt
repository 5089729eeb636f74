// A standard Play application (routes file, injected controller), staged with `sbt stage`.
lazy val root = (project in file("."))
  .enablePlugins(PlayScala)
  .settings(
    name := "netarena-play",
    version := "1.0",
    scalaVersion := "2.13.18",
    libraryDependencies += guice,
    // /mongo: MongoDB's official reactive-streams driver, consumed through Pekko Streams (no thread blocks).
    libraryDependencies += "org.mongodb" % "mongodb-driver-reactivestreams" % "5.8.1",
    // TechEmpower's database scenarios: Play's JDBC module (its HikariCP pool) and PostgreSQL's own JDBC driver,
    // the release java-spring-mvc-vt and java-helidon-se run, so the driver is not what differs between them.
    // play-jdbc at 3.0.9, not the plugin's `jdbc` (3.0.11): the Maven Central netarena resolves from holds no
    // play-jdbc 3.0.10 or 3.0.11. Play keeps binary compatibility within 3.0.x, and play-jdbc's own dependency on
    // play 3.0.9 resolves to the 3.0.11 the plugin brings.
    libraryDependencies += "org.playframework" %% "play-jdbc" % "3.0.9",
    libraryDependencies += "org.postgresql" % "postgresql" % "42.7.11",
    // netarena builds outside the repository: -Dnetarena.target={build_dir}/sbt-target.
    target := sys.props.get("netarena.target").map(file).getOrElse(baseDirectory.value / "target"),
    // No Scaladoc in the staged package: it only slows the build down.
    Compile / doc / sources := Seq.empty,
    Compile / packageDoc / publishArtifact := false
  )
