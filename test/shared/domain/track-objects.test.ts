import { describe, expect, it } from 'vitest'
import type { z } from 'zod'
import {
  AttributeObject,
  EventObject,
  PurchaseObject,
  parseAttributes,
  parseEvent,
  parsePurchase,
} from '../../../shared/domain/track-objects.js'
import { FieldError } from '../../../shared/domain/track-validation.js'

const TIME = '2024-05-01T12:00:00Z'

/** The message a parser refuses an object with, or undefined when it accepts it. */
function refusal(parse: () => unknown): string | undefined {
  try {
    parse()
    return undefined
  } catch (e) {
    if (!(e instanceof FieldError)) throw e
    return e.message
  }
}

/** The documented schema must accept exactly what the handler's parser accepts: its shape is never stricter. */
function expectSchemaAgrees(schema: z.ZodType, raw: unknown, accepted: boolean) {
  expect(schema.safeParse(raw).success, JSON.stringify(raw)).toBe(accepted)
}

describe('attributes objects', () => {
  it('normalizes standard fields and keeps custom attributes as sent', () => {
    const op = parseAttributes(
      {
        external_id: 'u1',
        email: ' Ann@Example.COM ',
        phone: '+1 (415) 555-2671',
        gender: 'f',
        country: 'de',
        language: 'DE',
        dob: '1990-02-28',
        time_zone: 'Europe/Berlin',
        first_name: null,
        email_subscribe: 'opted_in',
        visits: { inc: 2 },
        tags: { add: ['a'], remove: ['b'] },
        plan: 'gold',
        _update_existing_only: true,
        subscription_groups: [{ subscription_group_id: 'g1', subscription_state: 'subscribed' }],
      },
      4,
    )
    expect(op).toEqual({
      index: 4,
      identifier: { kind: 'external_id', value: 'u1' },
      updateExistingOnly: true,
      fields: {
        email: 'ann@example.com',
        phone: '+14155552671',
        gender: 'F',
        country: 'DE',
        language: 'de',
        dob: '1990-02-28',
        time_zone: 'Europe/Berlin',
        first_name: null,
        email_subscribe: 'opted_in',
      },
      custom: { visits: { inc: 2 }, tags: { add: ['a'], remove: ['b'] }, plan: 'gold' },
      subscriptionGroups: [{ subscription_group_id: 'g1', subscription_state: 'subscribed' }],
    })
  })

  it('leaves out of the job what holds nothing: no push-token import, no tokens, no subscription groups', () => {
    expect(JSON.stringify(parseAttributes({ external_id: 'u1', plan: 'gold' }, 0))).toBe(
      '{"index":0,"identifier":{"kind":"external_id","value":"u1"},"fields":{},"custom":{"plan":"gold"}}',
    )
    const tokens = parseAttributes({ external_id: 'u1', push_tokens: [{ app_id: 'a', token: 't' }] }, 0)
    expect(tokens).toMatchObject({ pushTokens: [{ app_id: 'a', token: 't' }] })
    expect(tokens).not.toHaveProperty('pushTokenImport')
    expect(tokens).not.toHaveProperty('subscriptionGroups')
    expect(parseAttributes({ push_token_import: true, push_tokens: [{ app_id: 'a', token: 't' }] }, 0)).toMatchObject({ pushTokenImport: true, identifier: undefined })
  })

  it('is identified by email, then phone, when it names no external_id, user_alias or service_id', () => {
    expect(parseAttributes({ email: 'A@b.co', phone: '+14155552671' }, 0).identifier).toEqual({ kind: 'email', value: 'a@b.co' })
    expect(parseAttributes({ phone: '14155552671' }, 0).identifier).toEqual({ kind: 'phone', value: '+14155552671' })
    expect(parseAttributes({ user_alias: { alias_name: 'n', alias_label: 'l' } }, 0).identifier).toEqual({ kind: 'user_alias', alias_name: 'n', alias_label: 'l' })
  })

  it('maps a country\'s English name, alias or alpha-3 code to its alpha-2 code', () => {
    const country = (value: string) => parseAttributes({ external_id: 'u1', country: value }, 0).fields.country
    expect(['United States', 'united states of america', 'USA', 'us', 'UK', 'Great Britain', 'deu', "Côte d'Ivoire", 'The Netherlands'].map(country)).toEqual([
      'US', 'US', 'US', 'US', 'GB', 'GB', 'DE', 'CI', 'NL',
    ])
  })

  it('leaves out alone, with a message each, a country it cannot map, a bad current_location or time zone and the names it does not set; the rest applies', () => {
    const dropped: string[] = []
    const op = parseAttributes(
      { external_id: 'u1', country: 'Congo', current_location: { latitude: 40.7 }, time_zone: 'Eastern Time (US & Canada)', alias_name: 'a', bio: 'b', first_name: 'Ann', plan: 'gold' },
      3,
      dropped,
    )
    expect(op.fields).toEqual({ first_name: 'Ann' })
    expect(op.custom).toEqual({ plan: 'gold' })
    expect(dropped).toEqual([
      'attributes[3].country: names more than one country (CD, CG); send its ISO 3166-1 alpha-2 code. Not stored',
      'attributes[3].current_location: must be {longitude, latitude}, numbers from -180 to 180 and from -90 to 90. Not stored',
      'attributes[3].time_zone: must be an IANA time zone such as America/New_York. Not stored',
      'attributes[3].alias_name: a column of CSV imports, not a member of an attributes object (send user_alias); not stored',
      'attributes[3].bio: no longer a profile field, and not a custom attribute either; not stored',
    ])
    const unknown: string[] = []
    expect(parseAttributes({ external_id: 'u1', country: 'Atlantis' }, 0, unknown).fields).toEqual({})
    expect(unknown).toEqual(["attributes[0].country: must be an ISO 3166-1 alpha-2 code, or a country's English name or alpha-3 code. Not stored"])
  })

  it('sets the reference\'s other standard fields as fields, not custom attributes', () => {
    const op = parseAttributes(
      {
        braze_id: 'b1',
        current_location: { longitude: -73.991443, latitude: 40.753824 },
        image_url: 'https://example.com/a.png',
        date_of_first_session: '2024-05-01T14:00:00+02:00',
        date_of_last_session: '2024-06-01',
        marked_email_as_spam_at: null,
        email_open_tracking_disabled: true,
        email_click_tracking_disabled: null,
        facebook: { id: 'f1', likes: ['a'], num_friends: 3 },
        twitter: { id: '123', screen_name: 'ann', followers_count: 2 },
        _merge_objects: true,
      },
      0,
    )
    expect(op).toEqual({
      index: 0,
      identifier: { kind: 'service_id', value: 'b1' },
      updateExistingOnly: undefined,
      mergeObjects: true,
      fields: {
        last_coordinates: [-73.991443, 40.753824],
        image_url: 'https://example.com/a.png',
        date_of_first_session: '2024-05-01T12:00:00.000Z',
        date_of_last_session: '2024-06-01T00:00:00.000Z',
        marked_email_as_spam_at: null,
        email_open_tracking_disabled: true,
        email_click_tracking_disabled: false,
        facebook: { id: 'f1', likes: ['a'], num_friends: 3 },
        twitter: { id: '123', screen_name: 'ann', followers_count: 2 },
      },
      custom: {},
    })
  })

  it('keeps edits of arrays of objects and nested objects as sent, leaving one over the size limit out alone', () => {
    const edit = {
      $add: [{ id: 3, name: 'Doug' }],
      $update: [{ $identifier_key: 'id', $identifier_value: 4, $new_object: { breed: 'goldfish' } }],
      $remove: [{ $identifier_key: 'type', $identifier_value: 'dog' }],
    }
    const dropped: string[] = []
    const big = [{ blob: 'x'.repeat(100 * 1024) }]
    const op = parseAttributes({ external_id: 'u1', pets: edit, song: { name: 'Solea', plays: { count: 3 } }, big, bigger: { $add: big }, tags: ['x'.repeat(200 * 1024)] }, 0, dropped)
    expect(op.custom).toEqual({ pets: edit, song: { name: 'Solea', plays: { count: 3 } }, tags: ['x'.repeat(200 * 1024)] })
    expect(dropped).toEqual([
      'attributes[0].big: is larger than 100 KB (102400 bytes of JSON), the limit of a nested value; not stored',
      'attributes[0].bigger: is larger than 100 KB (102400 bytes of JSON), the limit of a nested value; not stored',
    ])
  })

  it('imports push tokens without an identifier', () => {
    const op = parseAttributes({ push_token_import: true, push_tokens: [{ app_id: 'app', token: 't1' }] }, 0)
    expect(op).toMatchObject({ identifier: undefined, pushTokenImport: true, pushTokens: [{ app_id: 'app', token: 't1' }] })
  })

  const refused: [string, unknown, string][] = [
    ['not an object', ['u1'], 'attributes[0]: must be an object'],
    ['no identifier', { first_name: 'Ann' }, 'attributes[0]: one of external_id, user_alias, service_id, email or phone is required to identify the user'],
    ['two identifiers', { external_id: 'u1', service_id: 's1' }, 'attributes[0]: send exactly one of external_id, user_alias, service_id (got external_id, service_id)'],
    ['an empty external_id', { external_id: '' }, 'attributes[0].external_id: must be a non-empty string'],
    ['a removed external_id', { external_id: null, email: 'a@b.co' }, 'attributes[0].external_id: must be a non-empty string'],
    ['an alias without its label', { user_alias: { alias_name: 'n' } }, 'attributes[0].user_alias: must be an object with string alias_name and alias_label'],
    ['a bad email', { external_id: 'u1', email: 'not-an-address' }, 'attributes[0].email: must be a valid email address'],
    ['an over-long email', { external_id: 'u1', email: `${'a'.repeat(250)}@b.co` }, 'attributes[0].email: must be at most 254 characters'],
    ['a bad phone', { external_id: 'u1', phone: '12' }, 'attributes[0].phone: must be a valid phone number with country code (E.164)'],
    ['a bad gender', { external_id: 'u1', gender: 'X' }, 'attributes[0].gender: must be one of M, F, O, N, P or null'],
    ['a bad dob', { external_id: 'u1', dob: '1990-2-28' }, 'attributes[0].dob: must be a date YYYY-MM-DD'],
    ['a null email_subscribe', { external_id: 'u1', email_subscribe: null }, 'attributes[0].email_subscribe: cannot be null'],
    ['a number as a standard field', { external_id: 'u1', first_name: 5 }, 'attributes[0].first_name: must be a string or null'],
    ['an inc that is no integer', { external_id: 'u1', visits: { inc: 1.5 } }, 'attributes[0].visits: inc must be an integer'],
    ['an inc beside other members', { external_id: 'u1', visits: { inc: 1, by: 2 } }, 'attributes[0].visits: an inc object must have only the inc member'],
    ['an over-long attribute name', { external_id: 'u1', ['a'.repeat(256)]: 1 }, `attributes[0].${'a'.repeat(256)}: attribute names must be 1 to 255 characters`],
    ['a non-boolean _update_existing_only', { external_id: 'u1', _update_existing_only: 'yes' }, 'attributes[0]._update_existing_only: must be a boolean'],
    ['a push token import naming a user', { push_token_import: true, external_id: 'u1', push_tokens: [{ app_id: 'a', token: 't' }] }, 'attributes[0]: with push_token_import, do not send external_id or service_id'],
    ['a push token import without tokens', { push_token_import: true }, 'attributes[0].push_tokens: push_token_import needs at least one push token'],
    ['a push token without its app', { external_id: 'u1', push_tokens: [{ token: 't' }] }, 'attributes[0].push_tokens[0].app_id: Invalid input: expected string, received undefined'],
    ['an unknown subscription state', { external_id: 'u1', subscription_groups: [{ subscription_group_id: 'g', subscription_state: 'maybe' }] }, 'attributes[0].subscription_groups[0].subscription_state: Invalid option: expected one of "subscribed"|"unsubscribed"'],
    ['braze_id beside external_id', { external_id: 'u1', braze_id: 'b1' }, 'attributes[0]: send exactly one of external_id, user_alias, service_id (got external_id, braze_id)'],
    ['an empty braze_id', { braze_id: '' }, 'attributes[0].braze_id: must be a non-empty string'],
    ['an image_url that is no URL', { external_id: 'u1', image_url: 'avatar.png' }, 'attributes[0].image_url: must be an absolute http or https URL of at most 2048 characters'],
    ['an image_url of another scheme', { external_id: 'u1', image_url: 'ftp://example.com/a.png' }, 'attributes[0].image_url: must be an absolute http or https URL of at most 2048 characters'],
    ['a session time that is no time', { external_id: 'u1', date_of_first_session: 'yesterday' }, 'attributes[0].date_of_first_session: must be an ISO 8601 timestamp with an offset or Z, e.g. 2024-05-01T12:00:00Z'],
    ['a flag sent as a string', { external_id: 'u1', email_open_tracking_disabled: 'true' }, 'attributes[0].email_open_tracking_disabled: must be true, false or null'],
    ['facebook with a member it has not', { external_id: 'u1', facebook: { id: 'f1', friends: 3 } }, 'attributes[0].facebook: Unrecognized key: "friends"'],
    ['twitter with a negative count', { external_id: 'u1', twitter: { followers_count: -1 } }, 'attributes[0].twitter.followers_count: Too small: expected number to be >=0'],
    ['a non-boolean _merge_objects', { external_id: 'u1', _merge_objects: 'yes' }, 'attributes[0]._merge_objects: must be a boolean'],
    ['$add of plain values', { external_id: 'u1', pets: { $add: ['rex'] } }, 'attributes[0].pets: $add[0] must be an object (add values with add)'],
    ['$add that is no array', { external_id: 'u1', pets: { $add: { id: 1 } } }, 'attributes[0].pets: $add must be an array'],
    ['$update without $new_object', { external_id: 'u1', pets: { $update: [{ $identifier_key: 'id', $identifier_value: 1 }] } }, 'attributes[0].pets: $update[0].$new_object must be an object'],
    ['$remove of an item key with more members', { external_id: 'u1', pets: { $remove: [{ $identifier_key: 'id', $identifier_value: 1, name: 'x' }] } }, 'attributes[0].pets: $remove[0] must be an object {$identifier_key, $identifier_value}, not with name'],
    ['an $identifier_value that is an object', { external_id: 'u1', pets: { $remove: [{ $identifier_key: 'id', $identifier_value: { n: 1 } }] } }, 'attributes[0].pets: $remove[0].$identifier_value must be a string, a number or a boolean'],
    ['an empty $identifier_key', { external_id: 'u1', pets: { $remove: [{ $identifier_key: '', $identifier_value: 1 }] } }, 'attributes[0].pets: $remove[0].$identifier_key must be a member name of 1 to 255 characters'],
    ['an operator the reference has not', { external_id: 'u1', pets: { $push: [{ id: 1 }] } }, 'attributes[0].pets: unknown member $push: an edit of an array of objects has $add, $update and $remove'],
    ['an operator beside other members', { external_id: 'u1', pets: { $add: [{ id: 1 }], add: [2] } }, 'attributes[0].pets: unknown member add: an edit of an array of objects has $add, $update and $remove'],
  ]

  it.each(refused)('refuses %s, naming the field', (_, raw, message) => {
    expect(refusal(() => parseAttributes(raw, 0))).toBe(message)
  })

  it('is documented by a schema that accepts and refuses the same objects', () => {
    const accepted = [
      { external_id: 'u1', email: ' Ann@Example.COM ', gender: 'f', country: 'de', first_name: null, visits: { inc: 2 }, tags: ['a'], nested: { a: 1 } },
      { external_id: 'u1', country: 'Congo', current_location: 'here', pets: { $remove: [{ $identifier_key: 'id', $identifier_value: 1 }] }, _merge_objects: true },
      { email: 'a@b.co' },
      { push_token_import: true, push_tokens: [{ app_id: 'app', token: 't1', device_id: 'd' }] },
    ]
    for (const raw of accepted) expectSchemaAgrees(AttributeObject, raw, true)
    for (const [, raw] of refused) expectSchemaAgrees(AttributeObject, raw, false)
  })
})

describe('event objects', () => {
  it('normalizes the time to UTC', () => {
    const op = parseEvent({ external_id: 'u1', name: 'played', time: '2024-05-01T14:00:00+02:00', app_id: 'app', properties: { level: 3 } }, 2)
    expect(op).toEqual({
      index: 2,
      identifier: { kind: 'external_id', value: 'u1' },
      app_id: 'app',
      name: 'played',
      time: '2024-05-01T12:00:00.000Z',
      // As JSON text: the worker stores it as it is.
      properties: '{"level":3}',
    })
  })

  it('keeps _update_existing_only of events and purchases, and leaves it out when not sent', () => {
    expect(parseEvent({ external_id: 'u1', name: 'e', time: TIME, _update_existing_only: true }, 0)._update_existing_only).toBe(true)
    expect(parsePurchase({ braze_id: 'b1', product_id: 'p', currency: 'EUR', price: 1, time: TIME, _update_existing_only: false }, 0)).toMatchObject({
      identifier: { kind: 'service_id', value: 'b1' },
      _update_existing_only: false,
    })
    expect(JSON.stringify(parseEvent({ external_id: 'u1', name: 'e', time: TIME }, 0))).not.toContain('_update_existing_only')
    expect(refusal(() => parseEvent({ external_id: 'u1', name: 'e', time: TIME, _update_existing_only: 1 }, 0))).toBe('events[0]._update_existing_only: must be a boolean')
  })

  it('ignores the email of an event named by external_id', () => {
    expect(parseEvent({ external_id: 'u1', email: 'not-an-address', name: 'e', time: TIME }, 0).identifier).toEqual({ kind: 'external_id', value: 'u1' })
  })

  const refused: [string, unknown, string][] = [
    ['a missing name', { external_id: 'u1', time: TIME }, 'events[0].name: must be a string of 1 to 255 characters'],
    ['an over-long name', { external_id: 'u1', name: 'n'.repeat(256), time: TIME }, 'events[0].name: must be a string of 1 to 255 characters'],
    ['a time without an offset', { external_id: 'u1', name: 'e', time: '2024-05-01T12:00:00' }, 'events[0].time: must be an ISO 8601 timestamp with an offset or Z, e.g. 2024-05-01T12:00:00Z'],
    ['properties that are no object', { external_id: 'u1', name: 'e', time: TIME, properties: [1] }, 'events[0].properties: must be an object'],
    ['a non-string app_id', { external_id: 'u1', name: 'e', time: TIME, app_id: 7 }, 'events[0].app_id: must be a string'],
    ['no identifier', { name: 'e', time: TIME }, 'events[0]: one of external_id, user_alias, service_id, email or phone is required to identify the user'],
  ]

  it.each(refused)('refuses %s, naming the field', (_, raw, message) => {
    expect(refusal(() => parseEvent(raw, 0))).toBe(message)
  })

  it('is documented by a schema that accepts and refuses the same objects', () => {
    expectSchemaAgrees(EventObject, { external_id: 'u1', name: 'played', time: TIME, properties: { a: [1] }, extra: 1 }, true)
    expectSchemaAgrees(EventObject, { phone: '+14155552671', name: 'played', time: '2024-05-01T12:00Z' }, true)
    for (const [, raw] of refused) expectSchemaAgrees(EventObject, raw, false)
  })
})

describe('purchase objects', () => {
  it('upper-cases the currency and counts one when no quantity is sent', () => {
    const op = parsePurchase({ external_id: 'u1', product_id: 'sku', currency: 'usd', price: 9.5, time: TIME }, 1)
    expect(op).toEqual({
      index: 1,
      identifier: { kind: 'external_id', value: 'u1' },
      app_id: undefined,
      product_id: 'sku',
      currency: 'USD',
      price: 9.5,
      quantity: 1,
      time: '2024-05-01T12:00:00.000Z',
      properties: '{}',
    })
  })

  const purchase = { external_id: 'u1', product_id: 'sku', currency: 'USD', price: 1, time: TIME }
  const refused: [string, unknown, string][] = [
    ['an empty product_id', { ...purchase, product_id: '' }, 'purchases[0].product_id: must be a string of 1 to 255 characters'],
    ['a currency of four letters', { ...purchase, currency: 'EURO' }, 'purchases[0].currency: must be a three-letter ISO 4217 currency code'],
    ['a price as a string', { ...purchase, price: '1' }, 'purchases[0].price: must be a number'],
    ['a quantity of 0', { ...purchase, quantity: 0 }, 'purchases[0].quantity: must be an integer from 1 to 100'],
    ['a quantity of 101', { ...purchase, quantity: 101 }, 'purchases[0].quantity: must be an integer from 1 to 100'],
    ['a fractional quantity', { ...purchase, quantity: 1.5 }, 'purchases[0].quantity: must be an integer from 1 to 100'],
    ['a bad time', { ...purchase, time: 'yesterday' }, 'purchases[0].time: must be an ISO 8601 timestamp with an offset or Z, e.g. 2024-05-01T12:00:00Z'],
  ]

  it.each(refused)('refuses %s, naming the field', (_, raw, message) => {
    expect(refusal(() => parsePurchase(raw, 0))).toBe(message)
  })

  it('is documented by a schema that accepts and refuses the same objects', () => {
    expectSchemaAgrees(PurchaseObject, { ...purchase, quantity: 100, properties: { color: 'red' } }, true)
    expectSchemaAgrees(PurchaseObject, { ...purchase, currency: 'eur' }, true)
    for (const [, raw] of refused) expectSchemaAgrees(PurchaseObject, raw, false)
  })
})
