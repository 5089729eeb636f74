addSbtPlugin("org.playframework" % "sbt-plugin" % "3.0.11")
