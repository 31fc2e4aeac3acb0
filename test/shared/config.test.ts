import { spawn } from 'node:child_process'
import path from 'node:path'
import { describe, expect, it } from 'vitest'
import { ConfigError, loadConfig } from '../../shared/config.js'

const ROOT = path.resolve(import.meta.dirname, '../..')

/** The ConfigError loadConfig throws for `env`, so each test can read its message. */
function configErrorFor(env: Record<string, string>): ConfigError {
  try {
    loadConfig(env)
  } catch (e) {
    if (e instanceof ConfigError) return e
    throw e
  }
  throw new Error(`loadConfig accepted ${JSON.stringify(env)}`)
}

/** Starts the service entry point with nothing of this process's environment but PATH and HOME. */
function runMain(args: string[], env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('npx', ['tsx', 'bin/main.ts', ...args], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env },
    })
    let stderr = ''
    child.stderr.on('data', (d) => (stderr += d))
    child.on('error', reject)
    child.on('close', (code) => resolve({ code, stderr }))
  })
}

describe('loadConfig', () => {
  it('defaults to the values of operator.md section 1', () => {
    const c = loadConfig({})
    expect({
      PORT: c.PORT,
      HOST: c.HOST,
      DATABASE_URL: c.DATABASE_URL,
      REDIS_URL: c.REDIS_URL,
      CLICKHOUSE_URL: c.CLICKHOUSE_URL,
      DATA_DIR: c.DATA_DIR,
      ADMIN_TOKEN: c.ADMIN_TOKEN,
      PUBLIC_URL: c.PUBLIC_URL,
      CALLBACK_ALLOW_PRIVATE: c.CALLBACK_ALLOW_PRIVATE,
    }).toEqual({
      PORT: 3000,
      HOST: '127.0.0.1',
      DATABASE_URL: 'postgres://127.0.0.1:5432/userdata',
      REDIS_URL: 'redis://127.0.0.1:6379',
      CLICKHOUSE_URL: undefined,
      DATA_DIR: './.data',
      ADMIN_TOKEN: undefined,
      PUBLIC_URL: 'http://127.0.0.1:3000',
      CALLBACK_ALLOW_PRIVATE: false,
    })
  })

  it('derives PUBLIC_URL from HOST and PORT unless given, without a trailing slash', () => {
    expect(loadConfig({ HOST: '0.0.0.0', PORT: '8080' }).PUBLIC_URL).toBe('http://0.0.0.0:8080')
    expect(loadConfig({ PUBLIC_URL: 'https://data.example.com/' }).PUBLIC_URL).toBe('https://data.example.com')
  })

  it('reads typed values and treats an empty variable as unset', () => {
    const c = loadConfig({ PORT: '8081', CALLBACK_ALLOW_PRIVATE: 'true', CLICKHOUSE_URL: 'http://127.0.0.1:8123', DATA_DIR: '' })
    expect(c.PORT).toBe(8081)
    expect(c.CALLBACK_ALLOW_PRIVATE).toBe(true)
    expect(c.CLICKHOUSE_URL).toBe('http://127.0.0.1:8123')
    expect(c.DATA_DIR).toBe('./.data')
    expect(loadConfig({ CALLBACK_ALLOW_PRIVATE: '0' }).CALLBACK_ALLOW_PRIVATE).toBe(false)
  })

  it.each([
    ['PORT', 'abc'],
    ['PORT', '70000'],
    ['DATABASE_URL', 'nope'],
    ['REDIS_URL', 'localhost'],
    ['CLICKHOUSE_URL', 'not a url'],
    ['CALLBACK_ALLOW_PRIVATE', 'maybe'],
    ['PUBLIC_URL', 'example.com'],
  ])('refuses %s=%s with a ConfigError naming the variable', (name, value) => {
    const e = configErrorFor({ [name]: value })
    expect(e.message).toMatch(new RegExp(`^\\s*${name}: `, 'm'))
  })

  it('takes a ClickHouse cluster name only beside CLICKHOUSE_URL, and only of the characters remote_servers names use', () => {
    expect(loadConfig({ CLICKHOUSE_URL: 'http://127.0.0.1:8123', CLICKHOUSE_CLUSTER: 'analytics-eu.1' }).CLICKHOUSE_CLUSTER).toBe('analytics-eu.1')
    expect(configErrorFor({ CLICKHOUSE_CLUSTER: 'analytics' }).message).toMatch(/^\s*CLICKHOUSE_CLUSTER: needs CLICKHOUSE_URL/m)
    expect(configErrorFor({ CLICKHOUSE_URL: 'http://127.0.0.1:8123', CLICKHOUSE_CLUSTER: "a' OR 1" }).message).toMatch(/^\s*CLICKHOUSE_CLUSTER: letters, digits/m)
  })

  it('spaces inserts 100 ms apart by default on a ClickHouse server, where many worker processes insert, and not on the embedded engine', () => {
    expect(loadConfig({}).CLICKHOUSE_INSERT_INTERVAL_MS).toBe(0)
    expect(loadConfig({ CLICKHOUSE_URL: 'http://127.0.0.1:8123' }).CLICKHOUSE_INSERT_INTERVAL_MS).toBe(100)
    expect(loadConfig({ CLICKHOUSE_URL: 'http://127.0.0.1:8123', CLICKHOUSE_INSERT_INTERVAL_MS: '0' }).CLICKHOUSE_INSERT_INTERVAL_MS).toBe(0)
    expect(loadConfig({ CLICKHOUSE_INSERT_INTERVAL_MS: '250' }).CLICKHOUSE_INSERT_INTERVAL_MS).toBe(250)
  })

  it('names every bad variable in one error, and only those', () => {
    const e = configErrorFor({ PORT: 'abc', DATABASE_URL: 'nope', CALLBACK_ALLOW_PRIVATE: 'maybe', HOST: 'db.internal' })
    const named = e.message
      .split('\n')
      .slice(1)
      .map((line) => line.trim().split(':')[0])
    expect(named.sort()).toEqual(['CALLBACK_ALLOW_PRIVATE', 'DATABASE_URL', 'PORT'])
  })
})

describe('service entry point', () => {
  it('exits with code 2 and names PORT when PORT is bad, before touching any database', async () => {
    // An unreachable database proves the check comes first: reaching it would fail differently.
    const r = await runMain([], { PORT: 'abc', DATABASE_URL: 'postgres://127.0.0.1:9/none' })
    expect(r.code).toBe(2)
    expect(r.stderr).toMatch(/^\s*PORT: /m)
  })

  it('exits with code 2 for an unknown mode or worker queue', async () => {
    const [mode, queue] = await Promise.all([runMain(['bogus-mode'], {}), runMain(['worker', 'nosuchqueue'], {})])
    expect(mode.code).toBe(2)
    expect(mode.stderr).toContain('unknown mode bogus-mode')
    expect(queue.code).toBe(2)
    expect(queue.stderr).toContain('unknown worker queue(s): nosuchqueue')
  })
})
