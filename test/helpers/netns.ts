import { execFileSync, spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { until } from './wait.js'

/**
 * Hosts on one machine: each a network namespace with one interface, all plugged into a switch (a
 * bridge in a namespace of its own), and this process (the test, as a client) plugged in too. No
 * address leaves the machine: the subnet exists only on these veth pairs. `cut(host)` takes a
 * host's link down at the switch, `mend(host)` brings it back.
 */
export interface Lab {
  /** A host's address on the switch. */
  ip(host: string): string
  /** Starts a command inside a host's namespace. */
  spawn(host: string, command: string, args: string[], opts?: { env?: NodeJS.ProcessEnv; cwd?: string }): ChildProcess
  cut(host: string): void
  mend(host: string): void
  destroy(): void
}

/** Whether this machine can make such hosts (root, iproute2). */
export function canMakeHosts(): boolean {
  if (process.getuid?.() !== 0) return false
  try {
    execFileSync('ip', ['netns', 'list'], { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
}

const sh = (args: string[]) => execFileSync('ip', args, { stdio: ['ignore', 'ignore', 'pipe'] })

export function createLab(hosts: string[]): Lab {
  const id = randomBytes(2).toString('hex')
  // 10.231.x.0/24: a subnet of the private range that exists here only on our veth pairs.
  const subnet = `10.231.${parseInt(id, 16) % 250}`
  const sw = `uds-${id}-sw`
  const ns = (h: string) => `uds-${id}-${h}`
  const addr = new Map<string, string>(hosts.map((h, i) => [h, `${subnet}.${i + 2}`]))
  const switchSide = (h: string) => `s${id}${hosts.indexOf(h)}`
  const clientLink = `c${id}`
  const made: string[] = []
  const destroy = () => {
    for (const n of made.reverse()) {
      try {
        sh(['netns', 'del', n])
      } catch {
        /* gone */
      }
    }
    try {
      sh(['link', 'del', clientLink])
    } catch {
      /* gone with its peer */
    }
  }
  try {
    sh(['netns', 'add', sw])
    made.push(sw)
    sh(['-n', sw, 'link', 'add', 'br0', 'type', 'bridge'])
    sh(['-n', sw, 'link', 'set', 'br0', 'up'])
    sh(['-n', sw, 'link', 'set', 'lo', 'up'])
    hosts.forEach((h, i) => {
      sh(['netns', 'add', ns(h)])
      made.push(ns(h))
      const hostSide = `h${id}${i}`
      sh(['link', 'add', hostSide, 'type', 'veth', 'peer', 'name', switchSide(h)])
      sh(['link', 'set', hostSide, 'netns', ns(h)])
      sh(['link', 'set', switchSide(h), 'netns', sw])
      sh(['-n', sw, 'link', 'set', switchSide(h), 'master', 'br0', 'up'])
      sh(['-n', ns(h), 'link', 'set', hostSide, 'name', 'eth0'])
      sh(['-n', ns(h), 'addr', 'add', `${addr.get(h)}/24`, 'dev', 'eth0'])
      sh(['-n', ns(h), 'link', 'set', 'eth0', 'up'])
      sh(['-n', ns(h), 'link', 'set', 'lo', 'up'])
    })
    // The test's own seat on the switch, so it can call the API host.
    sh(['link', 'add', clientLink, 'type', 'veth', 'peer', 'name', `s${id}c`])
    sh(['link', 'set', `s${id}c`, 'netns', sw])
    sh(['-n', sw, 'link', 'set', `s${id}c`, 'master', 'br0', 'up'])
    sh(['addr', 'add', `${subnet}.1/24`, 'dev', clientLink])
    sh(['link', 'set', clientLink, 'up'])
  } catch (e) {
    destroy()
    throw e
  }
  return {
    ip: (h) => addr.get(h)!,
    spawn: (h, command, args, opts = {}) => spawn('ip', ['netns', 'exec', ns(h), command, ...args], { env: opts.env, cwd: opts.cwd, stdio: ['ignore', 'pipe', 'pipe'] }),
    cut: (h) => sh(['-n', sw, 'link', 'set', switchSide(h), 'down']),
    mend: (h) => sh(['-n', sw, 'link', 'set', switchSide(h), 'up']),
    destroy,
  }
}

/** Postgres and Redis on a lab host, listening on its address only. */
export async function startDataHost(lab: Lab, host: string): Promise<{ databaseUrl: (db: string) => string; redisUrl: string; stop(): Promise<void> }> {
  const ip = lab.ip(host)
  const dir = mkdtempSync(path.join(os.tmpdir(), 'uds-lab-pg-'))
  const bin = path.join('/usr/lib/postgresql', readdirSync('/usr/lib/postgresql').sort((a, b) => Number(b) - Number(a))[0], 'bin')
  const data = path.join(dir, 'data')
  mkdirSync(data)
  const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim())
  const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim())
  chownSync(dir, uid, gid)
  chownSync(data, uid, gid)
  // The service connects as this OS user (trust auth), as on the machine's own server.
  execFileSync(path.join(bin, 'initdb'), ['-D', data, '--auth=trust', `--username=${os.userInfo().username}`], { uid, gid, stdio: 'ignore', cwd: '/' })
  writeFileSync(path.join(data, 'pg_hba.conf'), `local all all trust\nhost all all 0.0.0.0/0 trust\n`)
  // setpriv execs (runuser would stay as a parent a signal never reaches through).
  const postgres = lab.spawn(host, 'setpriv', [`--reuid=${uid}`, `--regid=${gid}`, '--clear-groups', path.join(bin, 'postgres'), '-D', data, '-c', `listen_addresses=${ip}`, '-c', 'port=5432', '-c', `unix_socket_directories=${dir}`, '-c', 'max_connections=200'])
  const redis = lab.spawn(host, 'redis-server', ['--bind', ip, '--port', '6379', '--save', '', '--appendonly', 'no', '--protected-mode', 'no'])
  const redisUrl = `redis://${ip}:6379`
  const databaseUrl = (db: string) => `postgres://${encodeURIComponent(os.userInfo().username)}@${ip}:5432/${db}`
  await until('the lab Postgres', () => existsSync(path.join(dir, `.s.PGSQL.5432`)), Boolean, 60_000, 100)
  return {
    databaseUrl,
    redisUrl,
    async stop() {
      for (const p of [postgres, redis]) p.kill('SIGTERM')
      await Promise.all([postgres, redis].map((p) => (p.exitCode !== null ? Promise.resolve() : new Promise((r) => p.once('exit', r)))))
      rmSync(dir, { recursive: true, force: true })
    },
  }
}
