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
    // netarena builds outside the repository: -Dnetarena.target={build_dir}/sbt-target.
    target := sys.props.get("netarena.target").map(file).getOrElse(baseDirectory.value / "target"),
    // No Scaladoc in the staged package: it only slows the build down.
    Compile / doc / sources := Seq.empty,
    Compile / packageDoc / publishArtifact := false
  )
