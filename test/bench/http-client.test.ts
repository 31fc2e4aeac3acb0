import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { HttpClient } from '../../bench/http-client.js'

// The load generator's client against node's own server: the answers the bench reads, on the sockets it keeps.
let server: http.Server
let url: string
const sockets = new Set<unknown>()
beforeAll(async () => {
  server = http.createServer((req, res) => {
    sockets.add(req.socket)
    let body = ''
    req.on('data', (c) => (body += c))
    req.on('end', () => {
      if (req.url === '/chunked') {
        res.writeHead(200, { 'content-type': 'text/plain' })
        res.write('first ü, ')
        setTimeout(() => res.end('then € last'), 20)
      } else if (req.url === '/close') {
        res.writeHead(200, { connection: 'close', 'content-length': '2' })
        res.end('ok')
      } else if (req.url === '/slow') {
        setTimeout(() => res.end('late'), 3000)
      } else {
        const answer = JSON.stringify({ method: req.method, auth: req.headers.authorization, type: req.headers['content-type'], body })
        res.writeHead(201, { 'content-type': 'application/json', 'x-request-id': 'req-1' })
        res.end(answer)
      }
    })
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()))
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
})
afterAll(() => new Promise<void>((r) => server.close(() => r())))

describe('the bench HTTP client', () => {
  it('sends method, headers and a UTF-8 body, and reads status, headers and body by length', async () => {
    const client = new HttpClient({ timeoutMs: 5000, idleMs: 30_000 })
    const body = JSON.stringify({ name: 'ünï €' })
    const r = await client.request(url, { method: 'POST', path: '/users/track', headers: { Authorization: 'Bearer k', 'Content-Type': 'application/json' }, body })
    expect(r.status).toBe(201)
    expect(r.headers['x-request-id']).toBe('req-1')
    expect(JSON.parse(r.body)).toEqual({ method: 'POST', auth: 'Bearer k', type: 'application/json', body })
  })

  it('reuses one socket for requests one after another, and opens more for requests at once', async () => {
    const client = new HttpClient({ timeoutMs: 5000, idleMs: 30_000 })
    sockets.clear()
    for (let i = 0; i < 5; i++) expect((await client.request(url, { method: 'GET', path: '/' })).status).toBe(201)
    expect(sockets.size).toBe(1)
    sockets.clear()
    const answers = await Promise.all(Array.from({ length: 4 }, () => client.request(url, { method: 'GET', path: '/' })))
    expect(answers.map((a) => a.status)).toEqual([201, 201, 201, 201])
    expect(sockets.size).toBe(4)
  })

  it('reads a chunked body, and a socket the server closes is not used again', async () => {
    const client = new HttpClient({ timeoutMs: 5000, idleMs: 30_000 })
    expect((await client.request(url, { method: 'GET', path: '/chunked' })).body).toBe('first ü, then € last')
    expect((await client.request(url, { method: 'GET', path: '/close' })).body).toBe('ok')
    sockets.clear()
    expect((await client.request(url, { method: 'GET', path: '/' })).status).toBe(201)
  })

  it('fails an answer that does not come in time with code timeout', async () => {
    const client = new HttpClient({ timeoutMs: 500, idleMs: 30_000 })
    await expect(client.request(url, { method: 'GET', path: '/slow' })).rejects.toMatchObject({ code: 'timeout' })
  })
})
