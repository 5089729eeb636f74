%% Raw TCP echo on gen_tcp: one Erlang process per connection, {active, once} flow control.
-module(netarena_echo).
-export([main/1]).

main([HostArg, PortArg]) ->
    Port = try list_to_integer(PortArg) catch error:badarg -> usage() end,
    Host = case inet:parse_address(HostArg) of {ok, Address} -> Address; {error, _} -> usage() end,
    Family = case tuple_size(Host) of 4 -> inet; 8 -> inet6 end,
    Opts = [binary, Family, {ip, Host}, {backlog, 1024}, {nodelay, true}, {reuseaddr, true},
            {active, false},
            %% The user-level buffer bounds what one {active, once} message carries. Left at its
            %% default (1460 bytes here) a 32 KiB chunk took 23 messages, setopts and sends:
            %% 3.8k chunks/s against 42k with the buffer at the echo scenario's chunk size.
            {buffer, 32768},
            %% Keep the socket writable after the client shuts down its side, so every byte it
            %% sent still comes back before we close.
            {exit_on_close, false}],
    case gen_tcp:listen(Port, Opts) of
        {ok, Listen} ->
            %% One acceptor per scheduler; each one that accepts hands its place to a new acceptor
            %% and becomes that connection's process.
            [spawn(fun() -> accept(Listen) end) || _ <- lists:seq(1, erlang:system_info(schedulers_online))],
            %% This process owns the listening socket: it must outlive the acceptors.
            receive after infinity -> ok end;
        {error, Reason} ->
            io:format(standard_error, "error: cannot listen on ~s port ~b: ~p~n", [HostArg, Port, Reason]),
            erlang:halt(1)
    end;
main(_) ->
    usage().

usage() ->
    io:format(standard_error, "usage: erl -noshell -run netarena_echo main HOST PORT~n", []),
    erlang:halt(2).

accept(Listen) ->
    case gen_tcp:accept(Listen) of
        {ok, Socket} ->
            spawn(fun() -> accept(Listen) end),
            ok = inet:setopts(Socket, [{active, once}]),
            loop(Socket);
        {error, closed} ->
            ok;
        {error, _} ->
            %% Typically emfile: back off instead of spinning, the limit may clear.
            timer:sleep(10),
            accept(Listen)
    end.

%% gen_tcp:send suspends this process while the socket's send queue is over its high watermark,
%% and {active, once} means nothing more is read meanwhile: a slow reader slows its own sender.
loop(Socket) ->
    receive
        {tcp, Socket, Data} ->
            case gen_tcp:send(Socket, Data) of
                ok ->
                    ok = inet:setopts(Socket, [{active, once}]),
                    loop(Socket);
                {error, _} ->
                    gen_tcp:close(Socket)
            end;
        {tcp_closed, Socket} ->
            gen_tcp:close(Socket);
        {tcp_error, Socket, _} ->
            gen_tcp:close(Socket)
    end.
