# The Rack app Puma serves (puma.rb names this file with `rackup`).
require_relative "app"

run RubyPuma.app
