%% HTTP contestant on OTP's own web server, inets httpd.
%%
%% The dynamic routes are an httpd callback module (the "Erlang Web Server API": a module whose
%% do/1 is called for each request, ahead of the stock modules); /static/ is served by the stock
%% mod_alias + mod_get. httpd runs one Erlang process per connection, so a request that sleeps
%% only suspends its own process.
-module(netarena_http).
-export([main/1, do/1]).

-include_lib("inets/include/httpd.hrl").

-define(MAX_BYTES, 16 * 1024 * 1024).
-define(MAX_SLEEP_MS, 60000).
-define(BODIES, netarena_bytes_bodies).

main([HostArg, PortArg, StaticDir]) ->
    Host = address(HostArg),
    Port = positive_int(PortArg, "port"),
    case filelib:is_dir(StaticDir) of
        true -> ok;
        false -> fail("static dir ~s is not a directory; pass the folder holding the static file set", [StaticDir])
    end,
    %% Bodies for /bytes/{n} are built once and shared: ETS hands out references to refc binaries.
    ets:new(?BODIES, [named_table, public, {read_concurrency, true}]),
    [bytes_body(N) || N <- [40, 10000, 524288]],
    ok = inets:start(),
    {ok, Cwd} = file:get_cwd(),
    Config = [
        %% OTP 25's httpd honours {ip_comm, SockOpts} (backlog, nodelay) only on the code path
        %% where it opens the listening socket up front, which it takes for {port, 0} (or an fd
        %% passed on erl's command line). So we ask for port 0 and put the real port in SockOpts,
        %% where gen_tcp:listen lets the later {port, _} win. Without this httpd listens with a
        %% backlog of 128 and no TCP_NODELAY, and since it writes headers and body separately
        %% every response waits ~40 ms for the delayed ACK (measured: 225 req/s on 10 connections).
        {port, 0},
        {bind_address, Host},
        {ipfamily, case tuple_size(Host) of 4 -> inet; 8 -> inet6 end},
        {server_name, "netarena"},
        {server_root, Cwd},
        {document_root, StaticDir},
        {modules, [?MODULE, mod_alias, mod_get]},
        {alias, {"/static/", filename:absname(StaticDir) ++ "/"}},
        {mime_types, [{"jpg", "image/jpeg"}, {"html", "text/html"}, {"txt", "text/plain"}]},
        %% httpd's default is at most 150 clients at once (the 151st gets 503); the benchmark
        %% opens up to thousands of connections.
        {socket_type, socket_type([{backlog, 1024}, {nodelay, true}, {port, Port}])},
        {max_clients, 20000},
        %% keep-alive with no per-connection request limit is httpd's default; said explicitly.
        {keep_alive, true}
    ],
    case inets:start(httpd, Config) of
        {ok, Pid} ->
            %% Guards the port trick above against a future httpd that reads it differently.
            [{port, Port}] = httpd:info(Pid, [port]);
        {error, Reason} -> fail("cannot listen on ~s port ~b: ~p", [HostArg, Port, Reason])
    end,
    receive after infinity -> ok end;
main(_) ->
    fail("usage: erl -noshell -run netarena_http main HOST PORT STATIC_DIR", []).

%% Cleartext, or HTTPS (OTP's ssl application: TLS 1.2 and 1.3, ALPN http/1.1) when netarena starts the server
%% for a TLS level: NETARENA_TLS_CERT and NETARENA_TLS_KEY then name the run's certificate and key (PEM).
socket_type(SockOpts) ->
    case {os:getenv("NETARENA_TLS_CERT"), os:getenv("NETARENA_TLS_KEY")} of
        {Cert, Key} when is_list(Cert), Cert =/= "", is_list(Key), Key =/= "" ->
            {ssl, [{certfile, Cert}, {keyfile, Key}, {versions, ['tlsv1.3', 'tlsv1.2']},
                   {alpn_preferred_protocols, [<<"http/1.1">>]} | SockOpts]};
        _ ->
            {ip_comm, SockOpts}
    end.

%% HOST: the address to listen on (0.0.0.0: every address).
address(Text) ->
    case inet:parse_address(Text) of
        {ok, Address} -> Address;
        {error, _} -> fail("host must be an IP address (0.0.0.0: every address), got ~s", [Text])
    end.

do(#mod{method = "GET", request_uri = Uri}) ->
    [Path | _] = string:split(Uri, "?"),
    route(Path);
do(#mod{data = Data}) ->
    {proceed, Data}.

route("/hello") ->
    respond(200, "text/plain", <<"Hello, World!">>);
route("/json") ->
    respond(200, "application/json", jiffy:encode(#{<<"message">> => <<"Hello, World!">>}));
route("/bytes/" ++ Digits) ->
    case bounded_int(Digits, ?MAX_BYTES) of
        {ok, N} -> respond(200, "application/octet-stream", bytes_body(N));
        error -> respond(400, "text/plain", io_lib:format("/bytes/{n} needs 0 <= n <= ~b~n", [?MAX_BYTES]))
    end;
route("/sleep/" ++ Digits) ->
    case bounded_int(Digits, ?MAX_SLEEP_MS) of
        {ok, Ms} ->
            timer:sleep(Ms),
            respond(200, "text/plain", ["slept ", integer_to_list(Ms)]);
        error ->
            respond(400, "text/plain", io_lib:format("/sleep/{ms} needs 0 <= ms <= ~b~n", [?MAX_SLEEP_MS]))
    end;
route("/static/" ++ _) ->
    {proceed, []};
route(_) ->
    respond(404, "text/plain", <<"not found\n">>).

respond(Code, Type, Body) ->
    Head = [{code, Code}, {content_type, Type}, {content_length, integer_to_list(iolist_size(Body))}],
    {break, [{response, {response, Head, [Body]}}]}.

bytes_body(N) ->
    case ets:lookup(?BODIES, N) of
        [{_, Body}] -> Body;
        [] ->
            Body = binary:copy(<<"*">>, N),
            ets:insert(?BODIES, {N, Body}),
            Body
    end.

bounded_int(Digits, Max) ->
    try list_to_integer(Digits) of
        N when N >= 0, N =< Max -> {ok, N};
        _ -> error
    catch
        error:badarg -> error
    end.

positive_int(Arg, What) ->
    try list_to_integer(Arg) of
        N when N > 0 -> N;
        _ -> fail("~s must be a positive integer, got ~s", [What, Arg])
    catch
        error:badarg -> fail("~s must be a positive integer, got ~s", [What, Arg])
    end.

fail(Format, Args) ->
    io:format(standard_error, "error: " ++ Format ++ "~n", Args),
    erlang:halt(2).
