/** `steerbot/testing`'s `email`: the fake of real local IMAP (dovecot) and SMTP (OpenSMTPD) servers. */
export { MAIL_DOMAIN, type MailServers, type MailUser, startMailServers } from '../fakes/mail-servers.js';
