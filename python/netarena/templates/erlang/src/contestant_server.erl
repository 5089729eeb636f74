%% A netarena contestant written by `netarena new`: OTP's gen_tcp only (erlang-base), so it needs no deps.
%%
%% Every route of the scenario catalog (docs/scenarios.md) but static is here; the manifest lists the ones it
%% claims. What verification holds every server to: HTTP/1.1 keep-alive, 127.0.0.1 only, a listen backlog of
%% at least 1024, TCP_NODELAY, and the exact bodies below. Replace it with your framework's and keep those.
-module(contestant_server).
-export([main/1]).

-define(BACKLOG, 4096).

main([Mode, PortText]) ->
    Port = list_to_integer(PortText),
    Packet = case Mode of "echo" -> raw; _ -> http_bin end,
    {ok, Listen} = gen_tcp:listen(Port, [binary, {packet, Packet}, {active, false}, {reuseaddr, true},
                                         {backlog, ?BACKLOG}, {nodelay, true}, {ip, {127, 0, 0, 1}}]),
    accept(Listen, Mode).

accept(Listen, Mode) ->
    {ok, Socket} = gen_tcp:accept(Listen),
    Pid = spawn(fun() -> receive go -> serve(Socket, Mode) end end),
    ok = gen_tcp:controlling_process(Socket, Pid),
    Pid ! go,
    accept(Listen, Mode).

serve(Socket, "echo") ->
    case gen_tcp:recv(Socket, 0) of
        {ok, Data} -> ok = gen_tcp:send(Socket, Data), serve(Socket, "echo");
        {error, _} -> gen_tcp:close(Socket)
    end;
serve(Socket, Mode) ->
    case gen_tcp:recv(Socket, 0) of
        {ok, {http_request, _Method, {abs_path, Path}, _Version}} ->
            Length = headers(Socket, 0),
            skip_body(Socket, Length),
            respond(Socket, hd(binary:split(Path, <<"?">>))),
            serve(Socket, Mode);
        _ -> gen_tcp:close(Socket)
    end.

%% The headers up to the blank line; returns the Content-Length (a request body is read and ignored).
headers(Socket, Length) ->
    case gen_tcp:recv(Socket, 0) of
        {ok, {http_header, _, 'Content-Length', _, Value}} -> headers(Socket, binary_to_integer(Value));
        {ok, {http_header, _, _, _, _}} -> headers(Socket, Length);
        {ok, http_eoh} -> Length;
        _ -> Length
    end.

skip_body(_Socket, 0) -> ok;
skip_body(Socket, Length) ->
    ok = inet:setopts(Socket, [{packet, raw}]),
    {ok, _} = gen_tcp:recv(Socket, Length),
    ok = inet:setopts(Socket, [{packet, http_bin}]).

respond(Socket, <<"/hello">>) -> reply(Socket, <<"text/plain">>, <<"Hello, World!">>);
respond(Socket, <<"/json">>) -> reply(Socket, <<"application/json">>, <<"{\"message\":\"Hello, World!\"}">>);
%% Built per request here; the catalog asks for one body per size (cache it, e.g. persistent_term, for bytes).
respond(Socket, <<"/bytes/", N/binary>>) ->
    reply(Socket, <<"application/octet-stream">>, binary:copy(<<"*">>, binary_to_integer(N)));
respond(Socket, <<"/sleep/", Ms/binary>>) ->
    timer:sleep(binary_to_integer(Ms)),  % this connection's process only
    reply(Socket, <<"text/plain">>, <<"slept ", Ms/binary>>);
respond(Socket, _) ->
    gen_tcp:send(Socket, <<"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n">>).

reply(Socket, Type, Body) ->
    Length = integer_to_binary(byte_size(Body)),
    gen_tcp:send(Socket, [<<"HTTP/1.1 200 OK\r\nContent-Type: ">>, Type, <<"\r\nContent-Length: ">>, Length,
                          <<"\r\n\r\n">>, Body]).
