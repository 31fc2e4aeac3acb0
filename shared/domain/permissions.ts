/**
 * API-key permissions of interface.md section 5, the read path of operator.md section 4, and the
 * names the public reference gives the endpoints beyond interface.md (docs/compatibility.md).
 */
export const Permissions = [
  'users.track',
  'users.track.sync',
  'users.merge',
  'users.identify',
  'users.delete',
  'users.alias.new',
  'users.alias.update',
  'users.external_ids.rename',
  'users.external_ids.remove',
  'users.export.segment',
  'users.export.global_control_group',
  'users.export.ids',
  'subscription.status.set',
  'subscription.status.get',
  'subscription.groups.get',
  'email.status',
  'email.spam.remove',
  'email.bounce.remove',
  'email.hard_bounces',
  'email.unsubscribe',
  'email.blacklist',
] as const
export type Permission = (typeof Permissions)[number]
